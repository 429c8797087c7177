// Random numbers that are the same on every platform (the standard
// distributions are not): 53-bit uniform doubles from a 64-bit engine, and
// normals from them by Box-Muller. Sweeps are planned from a seed, so a
// plan or a TPE draw is the same wherever it is replayed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

namespace commtune {

// xoshiro256++ (Blackman and Vigna), its state filled by splitmix64 from
// the seed: about three times faster than mt19937_64.
class Xoshiro256PlusPlus {
 public:
  using result_type = std::uint64_t;
  explicit Xoshiro256PlusPlus(std::uint64_t seed) {
    for (auto& word : state_) {
      seed += 0x9e3779b97f4a7c15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      word = z ^ (z >> 31);
    }
  }
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return UINT64_MAX; }
  result_type operator()() {
    const auto result = rotate(state_[0] + state_[3], 23) + state_[0];
    const auto t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotate(state_[3], 45);
    return result;
  }

 private:
  static std::uint64_t rotate(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }  // std::rotl is C++20's
  std::uint64_t state_[4];
};

template <class Engine>
class BasicDraw {
 public:
  explicit BasicDraw(std::uint64_t seed) : engine_(seed) {}
  // In [0, 1).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  std::size_t index(std::size_t n) { return std::min(n - 1, static_cast<std::size_t>(uniform() * n)); }
  double normal() {
    const double u = 1.0 - uniform();  // (0, 1]: log(u) is finite
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * uniform());
  }

 private:
  Engine engine_;
};

// Plans, TPE and each configuration's bootstrap: from mt19937_64, whose
// stream a stored sweep's seed was planned with.
using Draw = BasicDraw<std::mt19937_64>;
// Where numbers are drawn by the hundred million: the bootstrap of the
// compute pooled over every run of a sweep (10^8 numbers at 10^5 runs).
using FastDraw = BasicDraw<Xoshiro256PlusPlus>;

}  // namespace commtune

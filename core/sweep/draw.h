// Random numbers that are the same on every platform (the standard
// distributions are not): 53-bit uniform doubles from mt19937_64, and
// normals from them by Box-Muller. Sweeps are planned from a seed, so a
// plan or a TPE draw is the same wherever it is replayed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

namespace commtune {

class Draw {
 public:
  explicit Draw(std::uint64_t seed) : engine_(seed) {}
  // In [0, 1).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  std::size_t index(std::size_t n) { return std::min(n - 1, static_cast<std::size_t>(uniform() * n)); }
  double normal() {
    const double u = 1.0 - uniform();  // (0, 1]: log(u) is finite
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * uniform());
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace commtune

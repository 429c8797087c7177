#include "core/engine/hooks/numpy_random.h"

#include <stdexcept>

namespace commtune {

NumpyRandomState::NumpyRandomState(std::uint32_t seed) {
  key_[0] = seed;
  for (int i = 1; i < kWords; ++i)
    key_[i] = 1812433253u * (key_[i - 1] ^ (key_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
  position_ = kWords;
}

void NumpyRandomState::twist() {
  constexpr int m = 397;
  constexpr std::uint32_t upper = 0x80000000u, lower = 0x7fffffffu, matrix = 0x9908b0dfu;
  for (int i = 0; i < kWords; ++i) {
    const std::uint32_t y = (key_[i] & upper) | (key_[(i + 1) % kWords] & lower);
    key_[i] = key_[(i + m) % kWords] ^ (y >> 1) ^ ((y & 1u) ? matrix : 0u);
  }
  position_ = 0;
}

std::uint32_t NumpyRandomState::next_uint32() {
  if (position_ >= kWords) twist();
  std::uint32_t y = key_[position_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

std::int64_t NumpyRandomState::randint(std::int64_t high) {
  if (high <= 0 || high > (std::int64_t{1} << 32)) throw std::invalid_argument("randint: high must be in (0, 2^32]");
  const std::uint64_t range = static_cast<std::uint64_t>(high - 1);
  if (range == 0) return 0;
  std::uint64_t mask = range;
  for (int shift : {1, 2, 4, 8, 16}) mask |= mask >> shift;
  std::uint64_t value;
  do {
    value = next_uint32() & mask;
  } while (value > range);
  return static_cast<std::int64_t>(value);
}

void NumpyRandomState::set_state(const std::array<std::uint32_t, kWords>& key, int position) {
  if (position < 0 || position > kWords) throw std::invalid_argument("MT19937 position must be in [0, 624]");
  key_ = key;
  position_ = position;
}

}  // namespace commtune

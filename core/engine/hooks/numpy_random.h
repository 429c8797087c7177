// numpy's legacy RandomState (MT19937) as far as PyTorch's PowerSGD uses it:
// seeding with an integer and randint(high). PowerSGD draws its random
// projection seeds from it, so matching it draw for draw is what makes
// commtune's PowerSGD start from the same Q as PyTorch's.
#pragma once

#include <array>
#include <cstdint>

namespace commtune {

class NumpyRandomState {
 public:
  static constexpr int kWords = 624;

  // np.random.RandomState(seed) for 0 <= seed < 2^32 (MT19937 init_genrand).
  explicit NumpyRandomState(std::uint32_t seed = 0);

  // np.random.RandomState.randint(high) for 0 < high <= 2^32: masked
  // rejection sampling over 32-bit draws.
  std::int64_t randint(std::int64_t high);
  std::uint32_t next_uint32();

  // The state as numpy's get_state() shows it: 624 key words and a position.
  const std::array<std::uint32_t, kWords>& key() const { return key_; }
  int position() const { return position_; }
  void set_state(const std::array<std::uint32_t, kWords>& key, int position);

 private:
  void twist();

  std::array<std::uint32_t, kWords> key_{};
  int position_ = kWords;
};

}  // namespace commtune

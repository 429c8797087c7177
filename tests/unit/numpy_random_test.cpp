#include <gtest/gtest.h>

#include "core/engine/hooks/numpy_random.h"
#include "tests/support/python_oracle.h"

namespace {

TEST(NumpyRandomState, DrawsWhatNumpyDraws) {
  // Enough draws to cross a twist (624 words); high values near and at powers of two.
  const auto reference = commtune::testing::run_python(R"(
import json, numpy as np
out = {}
for seed in (0, 1, 123, 4294967295):
    r = np.random.RandomState(seed)
    out[str(seed)] = [int(r.randint(1_000_000_000)) for _ in range(700)] + [int(r.randint(h)) for h in (1, 2, 3, 1 << 31, 1 << 32)]
print(json.dumps(out))
)");
  for (std::uint32_t seed : {0u, 1u, 123u, 4294967295u}) {
    commtune::NumpyRandomState rng(seed);
    std::vector<std::int64_t> mine;
    for (int i = 0; i < 700; ++i) mine.push_back(rng.randint(1000000000));
    for (std::int64_t high : {1LL, 2LL, 3LL, 1LL << 31, 1LL << 32}) mine.push_back(rng.randint(high));
    EXPECT_EQ(nlohmann::json(mine), reference[std::to_string(seed)]) << "seed " << seed;
  }
}

TEST(NumpyRandomState, StateRoundTrips) {
  commtune::NumpyRandomState a(7);
  for (int i = 0; i < 1000; ++i) a.next_uint32();
  commtune::NumpyRandomState b(99);
  b.set_state(a.key(), a.position());
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(a.next_uint32(), b.next_uint32());
  EXPECT_THROW(b.set_state(a.key(), 625), std::invalid_argument);
  EXPECT_THROW(a.randint(0), std::invalid_argument);
}

}  // namespace

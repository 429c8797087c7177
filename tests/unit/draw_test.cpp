// The random streams verdicts and plans are drawn from (core/tuner/sweep/draw.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "core/tuner/sweep/draw.h"

namespace {

TEST(Draw, Xoshiro256PlusPlusGivesTheReferenceStream) {
  // The state is splitmix64's first four outputs from the seed
  // (0xe220a8397b1dcdaf is splitmix64's first from 0), and each number the
  // reference xoshiro256++'s next() (prng.di.unimi.it), computed apart.
  commtune::Xoshiro256PlusPlus engine(0);
  for (const std::uint64_t expected :
       {0x53175d61490b23dfull, 0x61da6f3dc380d507ull, 0x5c0fdf91ec9a7bfcull, 0x02eebf8c3bbe5e1aull})
    EXPECT_EQ(engine(), expected);
}

TEST(Draw, EveryIndexIsDrawnAndNoneOutside) {
  commtune::FastDraw fast(7);
  commtune::Draw planned(7);
  int seen_fast[5] = {}, seen_planned[5] = {};
  for (int i = 0; i < 5000; ++i) {
    const auto a = fast.index(5), b = planned.index(5);
    ASSERT_LT(a, 5u);
    ASSERT_LT(b, 5u);
    ++seen_fast[a];
    ++seen_planned[b];
  }
  for (int k = 0; k < 5; ++k) {  // 1000 expected each; 5 standard deviations is 141
    EXPECT_NEAR(seen_fast[k], 1000, 200) << k;
    EXPECT_NEAR(seen_planned[k], 1000, 200) << k;
  }
}

}  // namespace

// The dashboard's reduced curves (ui/plot/minmax_series): exact up to the
// point budget; beyond it, within budget, in x order, and every bucket's
// minimum and maximum kept, however the points arrived.
#include "ui/plot/minmax_series.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

using commtune::ui::MinMaxSeries;

TEST(MinMaxSeries, DrawsEveryPointWithinItsBudget) {
  MinMaxSeries s(64);
  for (int i = 0; i < 64; ++i) s.append(i, std::sin(i));
  EXPECT_EQ(s.stride(), 1u);
  EXPECT_EQ(s.drawn_x(), s.x());
  EXPECT_EQ(s.drawn_y(), s.y());
}

TEST(MinMaxSeries, KeepsEachBucketsExtremesBeyondIt) {
  const std::size_t budget = 256;
  MinMaxSeries s(budget);
  std::mt19937 rng(3);
  std::normal_distribution<double> noise;
  std::vector<double> ys;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double y = noise(rng);
    if (i == 77777) y = 50;  // one spike: must survive
    ys.push_back(y);
    const auto revision = s.revision();
    s.append(i, y);
    ASSERT_NE(s.revision(), revision);
    ASSERT_LE(s.drawn_x().size(), budget) << i;
  }
  const auto& dx = s.drawn_x();
  const auto& dy = s.drawn_y();
  EXPECT_TRUE(std::is_sorted(dx.begin(), dx.end()));
  EXPECT_GE(dx.size(), budget / 4);  // not reduced further than it must be
  // Every bucket of `stride` consecutive points contributes its min and its max.
  const auto stride = s.stride();
  for (std::size_t first = 0; first < ys.size(); first += stride) {
    const auto last = std::min(first + stride, ys.size());
    const auto lo = *std::min_element(ys.begin() + first, ys.begin() + last);
    const auto hi = *std::max_element(ys.begin() + first, ys.begin() + last);
    bool has_lo = false, has_hi = false;
    for (std::size_t k = 0; k < dx.size(); ++k) {
      if (dx[k] < first || dx[k] >= last) continue;
      has_lo |= dy[k] == lo;
      has_hi |= dy[k] == hi;
    }
    ASSERT_TRUE(has_lo && has_hi) << "bucket at " << first;
  }
  EXPECT_EQ(*std::max_element(dy.begin(), dy.end()), 50);
  EXPECT_EQ(s.size(), static_cast<std::size_t>(n));
}

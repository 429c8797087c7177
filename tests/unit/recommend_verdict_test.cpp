// The sentence a recommendation says: a configuration is used only for a
// speedup whose 95% interval lies above 1.0 and that reaches the model's
// margin; otherwise "keep allreduce", with the reason the printed interval
// shows: an interval wholly below 1.0 is slower, never "no measurable
// difference ... 0.71x (95%: 0.58-0.88), an interval that holds 1.0".
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/tuner/verdict/recommend.h"

using commtune::Candidate;
using commtune::RecommendOptions;
using commtune::recommendation_verdict;

namespace {

Candidate with_speedup(double value, double low, double high) {
  Candidate c;
  c.run_id = 7;
  c.label = "powersgd r8";
  c.speedup = {value, low, high};
  c.step_s = {0.01, 0.009, 0.011};
  return c;
}

bool says(const std::string& verdict, const std::string& words) { return verdict.find(words) != std::string::npos; }

}  // namespace

TEST(RecommendationVerdict, AnIntervalWhollyBelowOneIsSlowerNotNoDifference) {
  const RecommendOptions options;
  const auto c = with_speedup(0.71, 0.58, 0.88);
  EXPECT_FALSE(commtune::is_recommended(c, options));
  const auto v = recommendation_verdict(&c, "nvlink", options);
  EXPECT_TRUE(says(v, "keep allreduce: it is measurably faster on nvlink")) << v;
  EXPECT_TRUE(says(v, "0.71x (95%: 0.58-0.88), an interval wholly below 1.0")) << v;
  EXPECT_FALSE(says(v, "holds 1.0")) << v;
}

TEST(RecommendationVerdict, EachIntervalGetsItsOwnReason) {
  RecommendOptions options;
  const auto holds = with_speedup(1.02, 0.90, 1.15);
  EXPECT_TRUE(says(recommendation_verdict(&holds, "10gbit", options), "no measurable difference on 10gbit"));
  const auto short_of_margin = with_speedup(1.03, 1.01, 1.05);
  EXPECT_TRUE(says(recommendation_verdict(&short_of_margin, "10gbit", options), "below the model's margin of 1.05x"));
  Candidate no_interval = with_speedup(1.5, NAN, NAN);
  EXPECT_TRUE(says(recommendation_verdict(&no_interval, "10gbit", options), "no difference can be shown"));
  EXPECT_TRUE(says(recommendation_verdict(nullptr, "10gbit", options), "no other configuration keeps the loss"));
}

TEST(RecommendationVerdict, AMeasurableSpeedupPastTheMarginIsUsed) {
  const RecommendOptions options;
  const auto c = with_speedup(1.8, 1.6, 2.0);
  EXPECT_TRUE(commtune::is_recommended(c, options));
  const auto v = recommendation_verdict(&c, "100mbit", options);
  EXPECT_EQ(v.rfind("use powersgd r8 (run 7)", 0), 0u) << v;
  EXPECT_TRUE(says(v, "1.80x (95%: 1.60-2.00)")) << v;
}

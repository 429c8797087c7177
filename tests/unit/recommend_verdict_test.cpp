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

TEST(RecommendationVerdict, FiguresKeepTheDigitsThatPutThemOnTheirSideOfOne) {
  using commtune::digits_beside;
  EXPECT_EQ(digits_beside(0.99947, {1.0}), "0.999");  // "1.00" would read as holding 1.0
  EXPECT_EQ(digits_beside(1.00004, {1.0}), "1.00004");
  EXPECT_EQ(digits_beside(1.0, {1.0}), "1.00");
  EXPECT_EQ(digits_beside(0.72, {1.0}), "0.72");
  EXPECT_EQ(digits_beside(1.0496, {1.0, 1.05}), "1.0496");  // below the margin, so not "1.05"
  const auto c = with_speedup(0.72, 0.66, 0.99947);
  const auto v = recommendation_verdict(&c, "nvlink", RecommendOptions{});
  EXPECT_TRUE(says(v, "0.72x (95%: 0.66-0.999), an interval wholly below 1.0")) << v;
}

TEST(RecommendationVerdict, EveryCandidateSaysWhyItWasOrWasNotChosen) {
  using commtune::candidate_reason;
  const RecommendOptions options;
  auto best = with_speedup(1.8, 1.6, 2.0);
  best.run_id = 3;
  EXPECT_EQ(candidate_reason(best, &best, std::int64_t{3}, options), "chosen");
  auto slower = with_speedup(0.72, 0.66, 0.99947);  // not chosen, wholly below 1.0: its own reason, not "-"
  EXPECT_EQ(candidate_reason(slower, &best, std::int64_t{3}, options),
            "slower than allreduce: 0.72x (95%: 0.66-0.999), an interval wholly below 1.0");
  const auto holds = with_speedup(1.02, 0.90, 1.15);
  EXPECT_TRUE(says(candidate_reason(holds, &best, std::int64_t{3}, options), "an interval that holds 1.0"));
  auto runner_up = with_speedup(1.5, 1.3, 1.7);  // would be chosen but for run 3
  EXPECT_EQ(candidate_reason(runner_up, &best, std::int64_t{3}, options),
            "run 3 is predicted faster (1.80x (95%: 1.60-2.00))");
  auto excluded = with_speedup(2.5, 2.0, 3.0);
  excluded.excluded = "its loss is +4.1% from its baseline's, beyond 1.00%";
  EXPECT_EQ(candidate_reason(excluded, &best, std::int64_t{3}, options), "excluded: " + excluded.excluded);
  auto undrawn = with_speedup(1.2, NAN, NAN);
  EXPECT_TRUE(says(candidate_reason(undrawn, &best, std::int64_t{3}, options), "with no interval drawn"));
  Candidate baseline;
  baseline.is_baseline = true;
  EXPECT_EQ(candidate_reason(baseline, &best, std::int64_t{3}, options), "the baseline");
}

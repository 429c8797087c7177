// The variance split of a sweep's objective over its parameters, on trials
// whose answer is known: the parameter the objective is built from explains
// it, the one it ignores does not; bins keep a continuous axis honest.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/sweep/param_importance.h"

using commtune::parameter_importance;
using commtune::Trial;

TEST(ParameterImportance, TheParameterTheLossDependsOnExplainsIt) {
  // A PowerSGD grid: the loss falls with the rank, the start iteration adds nothing.
  std::vector<Trial> trials;
  for (int rank : {1, 2, 4, 8})
    for (int start : {10, 100, 1000}) trials.push_back({{std::to_string(rank), std::to_string(start)}, 3.0 / rank});
  const auto importance = parameter_importance({"hook.rank", "hook.start"}, trials);
  ASSERT_EQ(importance.size(), 2u);
  EXPECT_EQ(importance[0].param, "hook.rank");
  EXPECT_NEAR(importance[0].share, 1.0, 1e-12);
  EXPECT_EQ(importance[0].groups, 4);
  EXPECT_NEAR(importance[1].share, 0.0, 1e-12);
}

TEST(ParameterImportance, SharesSplitAnAdditiveObjectiveByItsVariances) {
  // loss = a + 2b over a full 2x2 grid: var(a term) = 0.25, var(2b term) = 1.
  std::vector<Trial> trials;
  for (int a : {0, 1})
    for (int b : {0, 1}) trials.push_back({{std::to_string(a), std::to_string(b)}, a + 2.0 * b});
  const auto importance = parameter_importance({"a", "b"}, trials);
  EXPECT_EQ(importance[0].param, "b");
  EXPECT_NEAR(importance[0].share, 0.8, 1e-12);
  EXPECT_NEAR(importance[1].share, 0.2, 1e-12);
}

TEST(ParameterImportance, AContinuousAxisIsBinnedAndDivergedTrialsAreLeftOut) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<Trial> trials;
  for (int i = 0; i < 60; ++i) {
    const double lr = uniform(rng), noise = uniform(rng);
    trials.push_back({{std::to_string(lr), std::to_string(noise)}, lr});  // noise: a distinct value per trial
  }
  trials.push_back({{"0.5", "0.5"}, NAN});
  const auto importance = parameter_importance({"lr", "noise"}, trials);
  EXPECT_EQ(importance[0].param, "lr");
  EXPECT_GT(importance[0].share, 0.9);
  EXPECT_EQ(importance[0].groups, commtune::kMaxGroups);
  EXPECT_LT(importance[1].share, 0.2);  // 5 bins of random values explain little, not everything
  EXPECT_TRUE(parameter_importance({"lr"}, {{{"1"}, 1.0}, {{"2"}, NAN}}).empty());
  EXPECT_THROW(parameter_importance({"a", "b"}, {{{"1"}, 1.0}}), std::invalid_argument);
}

// Figures of an analysed sweep (core/tuner/verdict/sweep_figures.h) that the
// Analysis page draws: optimization history, empirical distribution, the
// sign of each parameter's effect, the baseline of a slice.
#include <gtest/gtest.h>

#include <cmath>

#include "core/tuner/verdict/sweep_figures.h"

namespace commtune {
namespace {

AnalysedRun run(std::int64_t id, double loss, std::map<std::string, std::string> values, bool baseline = false) {
  AnalysedRun r;
  r.run_id = id;
  r.loss = loss;
  r.loss_mean = loss;
  r.baseline = baseline;
  r.axis_values = std::move(values);
  return r;
}

// Trials out of order in the analysis (it lists them by configuration), a baseline per lr, one diverged trial.
SweepAnalysis sweep() {
  SweepAnalysis a;
  a.axes = {"optimizer.lr", "hook.matrix_approximation_rank", "hook.name"};
  a.runs = {run(3, 1.5, {{"optimizer.lr", "0.1"}, {"hook.matrix_approximation_rank", "4"}, {"hook.name", "powersgd"}}),
            run(1, 2.0, {{"optimizer.lr", "0.01"}, {"hook.matrix_approximation_rank", "1"}, {"hook.name", "powersgd"}}),
            run(2, NAN, {{"optimizer.lr", "0.1"}, {"hook.matrix_approximation_rank", "1"}, {"hook.name", "powersgd"}}),
            run(4, 1.8, {{"optimizer.lr", "0.01"}, {"hook.matrix_approximation_rank", "4"}, {"hook.name", "powersgd"}}),
            run(5, 1.2, {{"optimizer.lr", "0.1"}, {"hook.matrix_approximation_rank", "8"}, {"hook.name", "powersgd"}}),
            run(6, 1.0, {{"optimizer.lr", "0.1"}, {"hook.name", "allreduce"}}, true),
            run(7, 1.4, {{"optimizer.lr", "0.01"}, {"hook.name", "allreduce"}}, true)};
  return a;
}

TEST(SweepFigures, HistoryFollowsTheTrialsInTheOrderTheyRanWithTheBestSoFar) {
  const auto h = optimization_history(sweep());
  ASSERT_EQ(h.trials.size(), 5u);  // the baselines are the reference, not trials
  std::vector<std::int64_t> ids;
  for (const auto& p : h.trials) ids.push_back(p.run_id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(h.trials[0].trial, 1);
  EXPECT_DOUBLE_EQ(*h.trials[0].best, 2.0);
  EXPECT_TRUE(h.trials[0].improved);
  EXPECT_DOUBLE_EQ(*h.trials[1].best, 2.0);  // diverged: the best stays
  EXPECT_FALSE(h.trials[1].improved);
  EXPECT_DOUBLE_EQ(*h.trials[2].best, 1.5);
  EXPECT_DOUBLE_EQ(*h.trials[3].best, 1.5);
  EXPECT_FALSE(h.trials[3].improved);
  EXPECT_DOUBLE_EQ(*h.trials[4].best, 1.2);
  EXPECT_EQ(h.diverged, 1);
  EXPECT_DOUBLE_EQ(*h.baseline_loss, 1.2);  // (1.0 + 1.4) / 2
}

TEST(SweepFigures, HistoryNumbersEachTrialAsTheSweepDoes) {
  // The baselines ran first as the sweep's trials 1 and 2: the search's first point is trial 3, as list,
  // show and the sweep's log number it (it was "trial 1").
  auto a = sweep();
  a.sweep_id = 1;
  for (auto& r : a.runs) r.trial = r.baseline ? r.run_id - 5 : r.run_id + 2;
  const auto numbers = [](const OptimizationHistory& h) {
    std::vector<std::int64_t> out;
    for (const auto& p : h.trials) out.push_back(p.trial);
    return out;
  };
  EXPECT_EQ(numbers(optimization_history(a)), (std::vector<std::int64_t>{3, 4, 5, 6, 7}));
  // The store's runs of several sweeps: their numbers repeat, so the points go in the order the runs ran.
  a.sweep_id = 0;
  a.runs[0].trial = a.runs[1].trial = 3;
  EXPECT_EQ(numbers(optimization_history(a)), (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
}

TEST(SweepFigures, TheDistributionCountsDivergedTrialsButNeverStepsForThem) {
  const auto e = empirical_distribution(sweep());
  EXPECT_EQ(e.trials, 5);
  EXPECT_EQ(e.diverged, 1);
  EXPECT_EQ(e.losses, (std::vector<double>{1.2, 1.5, 1.8, 2.0}));
  EXPECT_EQ(e.fractions, (std::vector<double>{0.2, 0.4, 0.6, 0.8}));  // never 1: one of five diverged
  EXPECT_DOUBLE_EQ(e.at(1.0), 0.0);
  EXPECT_DOUBLE_EQ(e.at(1.5), 0.4);
  EXPECT_DOUBLE_EQ(e.at(1.6), 0.4);
  EXPECT_DOUBLE_EQ(e.at(9.0), 0.8);
}

TEST(SweepFigures, EachNumericParameterGetsTheSignOfItsRankCorrelation) {
  const auto c = loss_correlations(sweep());
  ASSERT_EQ(c.size(), 3u);
  // lr: 0.01 -> 2.0, 1.8; 0.1 -> 1.5, 1.2 (the diverged trial left out): the loss falls as lr rises.
  EXPECT_EQ(c[0].param, "optimizer.lr");
  EXPECT_EQ(c[0].trials, 4);
  ASSERT_TRUE(c[0].rho);
  EXPECT_LT(*c[0].rho, 0);
  EXPECT_EQ(c[0].sign(), "\u2212");
  // rank: 1 -> 2.0; 4 -> 1.5, 1.8; 8 -> 1.2.
  ASSERT_TRUE(c[1].rho);
  EXPECT_LT(*c[1].rho, 0);
  // Words have no sign.
  EXPECT_FALSE(c[2].rho);
  EXPECT_EQ(c[2].sign(), "");
  // Ranks: x 1,2,3 against losses 3,2,1 is -1 exactly; against a rising loss +1.
  SweepAnalysis line;
  line.axes = {"x"};
  line.runs = {run(1, 3.0, {{"x", "1"}}), run(2, 2.0, {{"x", "10"}}), run(3, 1.0, {{"x", "100"}})};
  EXPECT_DOUBLE_EQ(*loss_correlations(line)[0].rho, -1.0);
  line.runs[0].loss = 0.5;
  line.runs[2].loss = 5.0;
  EXPECT_DOUBLE_EQ(*loss_correlations(line)[0].rho, 1.0);
  EXPECT_EQ(loss_correlations(line)[0].sign(), "+");
}

TEST(SweepFigures, ASliceIsReadAgainstTheBaselineAtEachValueOrOneLevel) {
  // The baselines were run at each lr: one per value.
  const auto by_lr = slice_baseline(sweep(), "optimizer.lr");
  EXPECT_FALSE(by_lr.level);
  ASSERT_EQ(by_lr.at_values.size(), 2u);
  EXPECT_EQ(by_lr.at_values[0].first, "0.01");
  EXPECT_DOUBLE_EQ(by_lr.at_values[0].second, 1.4);
  EXPECT_EQ(by_lr.at_values[1].first, "0.1");
  EXPECT_DOUBLE_EQ(by_lr.at_values[1].second, 1.0);
  // They have no rank: their mean, as one level.
  const auto by_rank = slice_baseline(sweep(), "hook.matrix_approximation_rank");
  ASSERT_TRUE(by_rank.level);
  EXPECT_DOUBLE_EQ(*by_rank.level, 1.2);
  EXPECT_EQ(by_rank.runs, 2);
  SweepAnalysis none;
  none.runs = {run(1, 1.0, {})};
  EXPECT_TRUE(slice_baseline(none, "x").empty());
}

TEST(SweepFigures, TheScatterMatrixPlacesEachTrialInEveryPanelItHasBothFor) {
  auto a = sweep();
  a.runs[0].step_ms = 12.5;  // run 3
  a.axes.push_back("hook.byteps_compressor_k");
  a.runs[1].axis_values["hook.byteps_compressor_k"] = "0.001";  // run 1
  a.runs[3].axis_values["hook.byteps_compressor_k"] = "1";      // run 4: three decades, a log scale
  const auto m = scatter_matrix(a);
  EXPECT_EQ(m.rows, (std::vector<std::string>{"tail loss", "ms/step"}));
  ASSERT_EQ(m.columns.size(), 4u);
  EXPECT_TRUE(m.columns[0].numeric);
  EXPECT_FALSE(m.columns[0].log);  // lr: 0.01 .. 0.1
  EXPECT_FALSE(m.columns[2].numeric);
  EXPECT_EQ(m.columns[2].categories, (std::vector<std::string>{"powersgd"}));  // the baselines' allreduce left out
  EXPECT_TRUE(m.columns[3].log);
  ASSERT_EQ(m.trials.size(), 5u);  // trials only, in the order they ran
  EXPECT_EQ(m.trials[0].run_id, 1);
  EXPECT_DOUBLE_EQ(*m.trials[0].x[0], 0.01);
  EXPECT_DOUBLE_EQ(*m.trials[0].x[2], 0.0);
  EXPECT_DOUBLE_EQ(*m.trials[0].x[3], 0.001);
  EXPECT_FALSE(m.trials[2].x[3]);    // run 3 has no k
  EXPECT_FALSE(m.trials[1].y[0]);    // run 2 diverged: no loss to place
  EXPECT_DOUBLE_EQ(*m.trials[2].y[1], 12.5);
  EXPECT_FALSE(m.trials[0].y[1]);    // no step time measured
}

}  // namespace
}  // namespace commtune

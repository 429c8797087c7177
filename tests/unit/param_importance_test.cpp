// The variance split of a sweep's objective over its parameters, on trials
// whose answer is known by hand: every share is a piece of one decomposition,
// so the shares (parameters, interactions, noise) sum to 1 on grids,
// replicated grids, conditional hook parameters and random search alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/tuner/sweep/draw.h"
#include "core/tuner/sweep/param_importance.h"
#include "core/tuner/verdict/sweep_analysis.h"

using commtune::Importance;
using commtune::ImportanceResult;
using commtune::parameter_importance;
using commtune::Trial;

namespace {

double sum_of_shares(const ImportanceResult& r) {
  double sum = 0;
  for (const auto& s : r.shares) sum += s.share;
  return sum;
}

const Importance& entry(const ImportanceResult& r, const std::string& param) {
  for (const auto& s : r.shares)
    if (s.param == param) return s;
  throw std::runtime_error("no entry " + param);
}

bool has_entry(const ImportanceResult& r, const std::string& param) {
  for (const auto& s : r.shares)
    if (s.param == param) return true;
  return false;
}

}  // namespace

TEST(ParameterImportance, AnAdditiveGridSplitsByTheTermsVariances) {
  // loss = a + 2b over a full 2x2 grid: var(a term) = 0.25, var(2b term) = 1.
  std::vector<Trial> trials;
  for (int a : {0, 1})
    for (int b : {0, 1}) trials.push_back({{std::to_string(a), std::to_string(b)}, a + 2.0 * b});
  const auto r = parameter_importance({"a", "b"}, trials);
  ASSERT_EQ(r.shares.size(), 3u);  // a, b, interactions (no replicates: no noise entry)
  EXPECT_EQ(r.shares[0].param, "b");
  EXPECT_NEAR(r.shares[0].share, 0.8, 1e-12);
  EXPECT_EQ(r.shares[1].param, "a");
  EXPECT_NEAR(r.shares[1].share, 0.2, 1e-12);
  EXPECT_EQ(r.shares[2].param, commtune::kInteractions);
  EXPECT_EQ(r.shares[2].kind, Importance::Kind::Interactions);
  EXPECT_NEAR(r.shares[2].share, 0.0, 1e-12);
  EXPECT_FALSE(has_entry(r, commtune::kNoise));
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
  EXPECT_NE(r.method.find("exact"), std::string::npos) << r.method;
}

TEST(ParameterImportance, TheParameterTheLossDependsOnExplainsIt) {
  // A PowerSGD grid: the loss falls with the rank, the start iteration adds nothing.
  std::vector<Trial> trials;
  for (int rank : {1, 2, 4, 8})
    for (int start : {10, 100, 1000}) trials.push_back({{std::to_string(rank), std::to_string(start)}, 3.0 / rank});
  const auto r = parameter_importance({"hook.rank", "hook.start"}, trials);
  ASSERT_EQ(r.shares.size(), 3u);
  EXPECT_EQ(r.shares[0].param, "hook.rank");
  EXPECT_NEAR(r.shares[0].share, 1.0, 1e-12);
  EXPECT_EQ(r.shares[0].groups, 4);
  EXPECT_EQ(r.shares[1].param, "hook.start");
  EXPECT_NEAR(r.shares[1].share, 0.0, 1e-12);
  EXPECT_EQ(r.shares[1].groups, 3);
  EXPECT_NEAR(entry(r, commtune::kInteractions).share, 0.0, 1e-12);
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
}

TEST(ParameterImportance, APureInteractionHasNoMainEffects) {
  // y = a xor b: each parameter alone changes nothing on average.
  std::vector<Trial> trials;
  for (int a : {0, 1})
    for (int b : {0, 1}) trials.push_back({{a ? "true" : "false", std::to_string(b)}, double(a ^ b)});
  const auto r = parameter_importance({"a", "b"}, trials);
  EXPECT_NEAR(entry(r, "a").share, 0.0, 1e-12);
  EXPECT_NEAR(entry(r, "b").share, 0.0, 1e-12);
  EXPECT_EQ(entry(r, "a").groups, 2);
  EXPECT_NEAR(entry(r, commtune::kInteractions).share, 1.0, 1e-12);
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
}

TEST(ParameterImportance, ReplicatesOfAConfigurationAreNoise) {
  // loss = a + 2b, each cell run twice (two seeds) at +-e_c around it. With
  // two replicates per cell the population variance is V_cells + mean(e_c^2)
  // = 1.25 + 0.075.
  const double e[2][2] = {{0.1, 0.2}, {0.3, 0.4}};
  std::vector<Trial> trials;
  for (int a : {0, 1})
    for (int b : {0, 1})
      for (int sign : {-1, 1}) trials.push_back({{std::to_string(a), std::to_string(b)}, a + 2.0 * b + sign * e[a][b]});
  const auto r = parameter_importance({"a", "b"}, trials);
  const double total = 1.25 + 0.075;
  EXPECT_NEAR(entry(r, "b").share, 1.0 / total, 1e-12);
  EXPECT_NEAR(entry(r, "a").share, 0.25 / total, 1e-12);
  EXPECT_NEAR(entry(r, commtune::kInteractions).share, 0.0, 1e-12);
  const auto& noise = entry(r, commtune::kNoise);
  EXPECT_EQ(noise.kind, Importance::Kind::Noise);
  EXPECT_EQ(noise.groups, 0);
  EXPECT_NEAR(noise.share, 0.075 / total, 1e-12);
  EXPECT_EQ(r.shares.back().param, commtune::kNoise);  // residual entries come after the parameters
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
}

TEST(ParameterImportance, ConditionalHookParametersAreSplitOnceNotCountedTwice) {
  // Three hooks, each crossed with the learning rate; only PowerSGD has a
  // rank and only BytePS a compressor. loss = hook base + own effect + lr
  // effect (+0 at 0.05, +0.2 at 0.1: variance 0.01 in every hook):
  //   allreduce 1.2              -> mean 1.3, within variance 0.01        (2 trials)
  //   powersgd  0.6 + {.3, 0, -.3} -> mean 0.7, within 0.06 rank + 0.01 lr (6 trials)
  //   byteps    1.0 + {.1, -.1}  -> mean 1.1, within 0.01 comp + 0.01 lr  (4 trials)
  // Overall mean 11.2/12; between hooks sum w_g (mu_g - mu)^2 = 53/900;
  // within sum w_g Var_g = (2*.01 + 6*.07 + 4*.02)/12 = 39/900; total 92/900.
  // So hook.name 53/92, rank (6/12 * 0.06) = 27/92, compressor (4/12 * 0.01)
  // = 3/92, lr 0.01 = 9/92, interactions 0: 92/92.
  // The old per-parameter one-way ANOVA read the absent rank as a "(not set)"
  // level, so the rank also took the PowerSGD-vs-rest gap: it reported rank
  // 0.83, hook.name 0.58, compressor 0.17, lr 0.10, summing to 1.67.
  // hook.name comes last: the gap between hooks still goes to it, not to
  // the rank that comes first and that only PowerSGD trials have.
  const std::vector<std::string> params = {"hook.matrix_approximation_rank", "hook.byteps_compressor_type",
                                           "optimizer.lr", "hook.name"};
  std::vector<Trial> trials;
  for (const std::string lr : {"0.05", "0.1"}) {
    const double l = lr == "0.1" ? 0.2 : 0.0;
    trials.push_back({{"", "", lr, "allreduce"}, 1.2 + l});
    trials.push_back({{"1", "", lr, "powersgd"}, 0.6 + 0.3 + l});
    trials.push_back({{"2", "", lr, "powersgd"}, 0.6 + l});
    trials.push_back({{"4", "", lr, "powersgd"}, 0.6 - 0.3 + l});
    trials.push_back({{"", "onebit", lr, "byteps"}, 1.0 + 0.1 + l});
    trials.push_back({{"", "topk", lr, "byteps"}, 1.0 - 0.1 + l});
  }
  const auto r = parameter_importance(params, trials);
  EXPECT_NEAR(entry(r, "hook.name").share, 53.0 / 92, 1e-12);
  EXPECT_NEAR(entry(r, "hook.matrix_approximation_rank").share, 27.0 / 92, 1e-12);
  EXPECT_NEAR(entry(r, "hook.byteps_compressor_type").share, 3.0 / 92, 1e-12);
  EXPECT_NEAR(entry(r, "optimizer.lr").share, 9.0 / 92, 1e-12);
  EXPECT_NEAR(entry(r, commtune::kInteractions).share, 0.0, 1e-12);
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
  EXPECT_EQ(entry(r, "hook.name").groups, 3);
  ASSERT_FALSE(r.shares.empty());
  EXPECT_EQ(entry(r, "hook.matrix_approximation_rank").groups, 3);  // "" is absence, not a level
  EXPECT_EQ(entry(r, "hook.byteps_compressor_type").groups, 2);
  EXPECT_EQ(r.shares[0].param, "hook.name");
  EXPECT_NE(r.method.find("exact"), std::string::npos) << r.method;
  EXPECT_NE(r.method.find("hook.name"), std::string::npos) << r.method;
}

TEST(ParameterImportance, ANameAxisCanVaryInsideAGroupToo) {
  // allreduce and fp16 have no own parameters, so their trials share a group
  // with a 2x2 grid of hook.name x lr; powersgd's trials form another.
  // Group {allreduce, fp16}: loss = {1, 1.4} + {0, 0.2}: mean 1.3, variance 0.04 + 0.01.
  // Group powersgd (rank 1, 2 x lr): loss = {0.5, 0.7} + {0, 0.2}: mean 0.7, variance 0.01 + 0.01.
  // mu = 1.0, between = 0.09, within = (0.05 + 0.02) / 2 = 0.035, total 0.125.
  std::vector<Trial> trials;
  for (const std::string lr : {"0.05", "0.1"}) {
    const double l = lr == "0.1" ? 0.2 : 0.0;
    trials.push_back({{"allreduce", "", lr}, 1.0 + l});
    trials.push_back({{"fp16", "", lr}, 1.4 + l});
    trials.push_back({{"powersgd", "1", lr}, 0.5 + l});
    trials.push_back({{"powersgd", "2", lr}, 0.7 + l});
  }
  const auto r = parameter_importance({"hook.name", "hook.rank", "optimizer.lr"}, trials);
  EXPECT_NEAR(entry(r, "hook.name").share, (0.09 + 0.5 * 0.04) / 0.125, 1e-12);
  EXPECT_NEAR(entry(r, "hook.rank").share, 0.5 * 0.01 / 0.125, 1e-12);
  EXPECT_NEAR(entry(r, "optimizer.lr").share, 0.01 / 0.125, 1e-12);
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
}

TEST(ParameterImportance, RandomSearchGoesThroughTheForestAndIsRepeatable) {
  // 40 random trials: lr in [0, 1], and a parameter that takes a distinct
  // random value in every trial but does not touch the loss. No grid, so the
  // trials alone cannot separate them: fANOVA on a forest does.
  commtune::Draw draw(11);
  std::vector<Trial> trials;
  for (int i = 0; i < 40; ++i) {
    const double lr = draw.uniform(), noise = draw.uniform();
    trials.push_back({{std::to_string(lr), std::to_string(noise)}, lr});
  }
  trials.push_back({{"0.5", "0.5"}, NAN});  // a diverged trial: left out
  const auto r = parameter_importance({"lr", "noise"}, trials);
  EXPECT_NE(r.method.find("forest"), std::string::npos) << r.method;
  ASSERT_FALSE(r.shares.empty());
  EXPECT_EQ(r.shares[0].param, "lr");
  EXPECT_GT(entry(r, "lr").share, 0.8);
  EXPECT_LT(entry(r, "noise").share, 0.15);
  EXPECT_EQ(entry(r, "noise").groups, 40);
  EXPECT_FALSE(has_entry(r, commtune::kNoise));  // the forest has no noise term
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);

  const auto again = parameter_importance({"lr", "noise"}, trials);
  ASSERT_EQ(again.shares.size(), r.shares.size());
  for (std::size_t i = 0; i < r.shares.size(); ++i) {
    EXPECT_EQ(again.shares[i].param, r.shares[i].param);
    EXPECT_EQ(again.shares[i].share, r.shares[i].share);
  }
}

TEST(ParameterImportance, AParameterSpanningDecadesIsMeasuredOnALogAxis) {
  // loss = log10(lr) + 3c, log10(lr) uniform in [-4, -1] and c in [0, 1]: on
  // a log axis for lr both terms have variance 0.75, so they share evenly. On
  // a linear axis most of lr's range would be near 0.1, where log10(lr)
  // hardly moves, and lr would get about 0.15 of it.
  commtune::Draw draw(1);
  std::vector<Trial> trials;
  for (int i = 0; i < 100; ++i) {
    const double exponent = -4 + 3 * draw.uniform(), c = draw.uniform();
    char lr[32];
    std::snprintf(lr, sizeof lr, "%.6g", std::pow(10.0, exponent));
    trials.push_back({{lr, std::to_string(c)}, exponent + 3 * c});
  }
  const auto r = parameter_importance({"lr", "c"}, trials);
  EXPECT_GT(entry(r, "lr").share, 0.4);
  EXPECT_LT(entry(r, "lr").share, 0.75);
  EXPECT_GT(entry(r, "c").share, 0.25);
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
}

TEST(ParameterImportance, AnIncompleteGridGoesThroughTheForest) {
  // A 3x4 grid with one cell never run, each cell twice; the loss is a
  // function of the hook alone. Every tree then splits on the hook only, so
  // the hook explains every tree's whole variance.
  std::vector<Trial> trials;
  for (const std::string hook : {"fp16", "powersgd", "topk"})
    for (const std::string bucket : {"1", "5", "25", "100"}) {
      if (hook == "topk" && bucket == "100") continue;
      const double loss = hook == "fp16" ? 1.0 : hook == "powersgd" ? 0.5 : 0.8;
      for (int seed = 0; seed < 2; ++seed) trials.push_back({{bucket, hook}, loss});
    }
  const auto r = parameter_importance({"bucket_mb", "hook.name"}, trials);
  EXPECT_NE(r.method.find("forest"), std::string::npos) << r.method;
  EXPECT_NEAR(entry(r, "hook.name").share, 1.0, 1e-9);
  EXPECT_NEAR(entry(r, "bucket_mb").share, 0.0, 1e-9);
  EXPECT_EQ(entry(r, "bucket_mb").groups, 4);
  EXPECT_NEAR(entry(r, commtune::kInteractions).share, 0.0, 1e-9);
  EXPECT_NEAR(sum_of_shares(r), 1.0, 1e-9);
}

TEST(ParameterImportance, DivergedTrialsAreLeftOutAndTooFewGiveNothing) {
  // A NaN among a grid would, if counted, break the exact grid's answer.
  std::vector<Trial> trials;
  for (int a : {0, 1})
    for (int b : {0, 1}) trials.push_back({{std::to_string(a), std::to_string(b)}, a + 2.0 * b});
  trials.push_back({{"0", "0"}, NAN});
  trials.push_back({{"1", "1"}, INFINITY});
  const auto r = parameter_importance({"a", "b"}, trials);
  EXPECT_NEAR(entry(r, "b").share, 0.8, 1e-12);
  EXPECT_FALSE(has_entry(r, commtune::kNoise));

  const auto few = parameter_importance({"lr"}, {{{"1"}, 1.0}, {{"2"}, 2.0}, {{"3"}, NAN}});
  EXPECT_TRUE(few.shares.empty());
  EXPECT_NE(few.method.find("3 or more"), std::string::npos) << few.method;

  const auto flat = parameter_importance({"lr"}, {{{"1"}, 1.0}, {{"2"}, 1.0}, {{"3"}, 1.0}});
  EXPECT_TRUE(flat.shares.empty());
  EXPECT_FALSE(flat.method.empty());

  EXPECT_THROW(parameter_importance({"a", "b"}, {{{"1"}, 1.0}}), std::invalid_argument);
}

// A sweep over hooks: the heatmap shows the learning rate against the hook,
// not the hook against a compressor that only BytePS trials have.
TEST(SweepAnalysis, HeatmapAxesAreThoseMostTrialsShare) {
  commtune::SweepAnalysis mixed;
  mixed.axes = {"hook.name", "hook.byteps_compressor_type", "optimizer.lr"};
  for (const char* lr : {"0.01", "0.1"}) {
    for (const char* compressor : {"onebit", "topk", "randomk"}) {
      commtune::AnalysedRun p;
      p.axis_values = {{"hook.name", "byteps"}, {"hook.byteps_compressor_type", compressor}, {"optimizer.lr", lr}};
      mixed.runs.push_back(p);
    }
    commtune::AnalysedRun allreduce;
    allreduce.axis_values = {{"hook.name", "allreduce"}, {"optimizer.lr", lr}};
    mixed.runs.push_back(allreduce);
  }
  const auto [x, y] = commtune::default_heatmap_axes(mixed);
  EXPECT_EQ((std::set<std::string>{x, y}), (std::set<std::string>{"hook.name", "optimizer.lr"}));
  // The parameter with more values goes across.
  EXPECT_EQ(x, "hook.name");
}

namespace {

commtune::AnalysedRun analysed(std::int64_t id, double loss, std::map<std::string, std::string> values,
                               std::int64_t configuration = 0) {
  commtune::AnalysedRun p;
  p.run_id = id;
  p.configuration_run = configuration;
  p.loss = p.loss_mean = loss;
  p.axis_values = std::move(values);
  return p;
}

}  // namespace

// A rank x start grid with a second seed of one configuration, a cell shared by two learning rates and a
// diverged configuration: each cell holds a configuration once and shows the best finite mean.
TEST(SweepAnalysis, HeatmapCellsHoldEachConfigurationOnce) {
  commtune::SweepAnalysis a;
  a.axes = {"rank", "start", "lr"};
  a.runs = {analysed(1, 2.0, {{"rank", "4"}, {"start", "10"}, {"lr", "0.1"}}),
            analysed(2, 2.0, {{"rank", "4"}, {"start", "10"}, {"lr", "0.1"}}, 1),  // run 1's second seed
            analysed(3, 1.5, {{"rank", "4"}, {"start", "10"}, {"lr", "0.2"}}),
            analysed(4, 3.0, {{"rank", "16"}, {"start", "2"}, {"lr", "0.1"}}),
            analysed(5, NAN, {{"rank", "1"}, {"start", "2"}, {"lr", "0.1"}})};
  const auto grid = commtune::heatmap_grid(a, "rank", "start");
  EXPECT_EQ(grid.xs, (std::vector<std::string>{"1", "4", "16"}));  // by value, not as text
  EXPECT_EQ(grid.ys, (std::vector<std::string>{"2", "10"}));
  EXPECT_TRUE(grid.gridded);
  ASSERT_EQ(grid.cells.size(), 3u);
  const auto& shared = grid.cells[0];
  EXPECT_EQ(shared.x, 1u);
  EXPECT_EQ(shared.y, 1u);
  EXPECT_EQ(shared.configurations.size(), 2u);  // runs 1 and 3; run 2 is run 1's configuration
  EXPECT_EQ(shared.best, 1.5);
  EXPECT_TRUE(grid.cells[2].diverged());
  EXPECT_TRUE(commtune::heatmap_grid(a, "rank", "rank").cells.empty());
}

TEST(SweepAnalysis, ASliceOrdersConfigurationsByValueAndRingsTheBest) {
  commtune::SweepAnalysis a;
  a.runs = {analysed(1, 2.0, {{"hook", "topk"}}), analysed(2, 1.0, {{"hook", "onebit"}}),
            analysed(3, NAN, {{"hook", "randomk"}}), analysed(4, 1.8, {{"hook", "topk"}}, 1)};
  const auto slice = commtune::slice_of(a, "hook");
  EXPECT_FALSE(slice.numeric);
  EXPECT_EQ(slice.categories, (std::vector<std::string>{"onebit", "topk"}));  // diverged randomk left out
  ASSERT_EQ(slice.points.size(), 2u);
  EXPECT_EQ(slice.points[0]->run_id, 2);
  EXPECT_EQ(slice.x, (std::vector<double>{0, 1}));
  EXPECT_EQ(slice.best, std::optional<std::size_t>(0));
}

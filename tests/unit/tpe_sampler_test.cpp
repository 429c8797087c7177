// TPE against random search on synthetic objectives, over many seeds; the
// split into good and bad trials with one and two objectives and with rungs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "core/tuner/sweep/draw.h"
#include "core/tuner/sweep/tpe_sampler.h"

using namespace commtune;

namespace {

using Objective = std::function<double(const std::vector<double>&)>;

// How many trials a search needs until it scores within `target` (at most `budget`).
std::int64_t trials_to_reach(const std::vector<TpeDimension>& dims, const Objective& f, double target,
                             std::int64_t budget, std::int64_t seed, bool tpe) {
  std::vector<TpeObservation> history;
  Draw random(static_cast<std::uint64_t>(seed) * 7919 + 1);
  TpeOptions options;
  options.seed = seed;
  for (std::int64_t t = 0; t < budget; ++t) {
    std::vector<double> x;
    if (tpe) {
      x = tpe_sample(dims, history, t, options);
    } else {
      for (const auto& d : dims) x.push_back(d.choices ? static_cast<double>(random.index(d.choices)) : random.uniform());
    }
    const double y = f(x);
    if (y <= target) return t + 1;
    history.push_back({x, {y}, 0});
  }
  return budget;
}

double median(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[v.size() / 2]);
}

// A PowerSGD-like space: a rank (listed: 1, 2, 4, 8), a start iteration
// (listed: 4 values) and a log-scaled learning rate (a range); the best is
// rank 4, start 2, lr near 0.03 (fraction 0.62 of 1e-3..1).
const std::vector<TpeDimension> kSpace = {{4}, {4}, {0}};
double powersgd_like(const std::vector<double>& x) {
  const double rank_cost[] = {0.6, 0.25, 0.0, 0.1};
  const double start_cost[] = {0.3, 0.0, 0.15, 0.4};
  const double lr = x[2] - 0.62;
  return rank_cost[static_cast<int>(x[0])] + start_cost[static_cast<int>(x[1])] + 4.0 * lr * lr;
}

}  // namespace

TEST(TpeSampler, FindsTheOptimumInFewerTrialsThanRandomSearchOverManySeeds) {
  const int seeds = 40;
  const std::int64_t budget = 200;
  std::vector<std::int64_t> tpe, random;
  int tpe_wins = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    tpe.push_back(trials_to_reach(kSpace, powersgd_like, 0.004, budget, seed, true));
    random.push_back(trials_to_reach(kSpace, powersgd_like, 0.004, budget, seed, false));
    tpe_wins += tpe.back() < random.back();
  }
  const double tpe_mean = std::accumulate(tpe.begin(), tpe.end(), 0.0) / seeds;
  const double random_mean = std::accumulate(random.begin(), random.end(), 0.0) / seeds;
  RecordProperty("tpe_median", std::to_string(median(tpe)));
  RecordProperty("random_median", std::to_string(median(random)));
  std::printf("trials to reach the optimum over %d seeds: TPE median %.0f mean %.1f, random median %.0f mean %.1f\n",
              seeds, median(tpe), tpe_mean, median(random), random_mean);
  EXPECT_LT(median(tpe), 0.6 * median(random));
  EXPECT_LT(tpe_mean, 0.7 * random_mean);
  EXPECT_GT(tpe_wins, seeds / 2);
}

TEST(TpeSampler, AContinuousBowlIsNarrowedDown) {
  // Two ranges, optimum at (0.2, 0.7): after 60 trials TPE's best is much closer than random search's.
  const std::vector<TpeDimension> dims = {{0}, {0}};
  const Objective bowl = [](const std::vector<double>& x) {
    return (x[0] - 0.2) * (x[0] - 0.2) + (x[1] - 0.7) * (x[1] - 0.7);
  };
  std::vector<double> tpe_best, random_best;
  for (int seed = 0; seed < 20; ++seed) {
    std::vector<TpeObservation> history;
    TpeOptions options;
    options.seed = seed;
    Draw random(static_cast<std::uint64_t>(seed) + 100);
    double best_tpe = INFINITY, best_random = INFINITY;
    for (std::int64_t t = 0; t < 60; ++t) {
      const auto x = tpe_sample(dims, history, t, options);
      history.push_back({x, {bowl(x)}, 0});
      best_tpe = std::min(best_tpe, bowl(x));
      best_random = std::min(best_random, bowl({random.uniform(), random.uniform()}));
    }
    tpe_best.push_back(best_tpe);
    random_best.push_back(best_random);
  }
  std::sort(tpe_best.begin(), tpe_best.end());
  std::sort(random_best.begin(), random_best.end());
  EXPECT_LT(tpe_best[10], 0.5 * random_best[10]);
}

TEST(TpeSampler, TheSameHistoryAndSeedGiveTheSamePoint) {
  std::vector<TpeObservation> history;
  for (int t = 0; t < 15; ++t) {
    const std::vector<double> x = {static_cast<double>(t % 4), static_cast<double>(t % 3), t / 15.0};
    history.push_back({x, {powersgd_like(x)}, 0});
  }
  TpeOptions options;
  options.seed = 7;
  const auto a = tpe_sample(kSpace, history, 15, options);
  EXPECT_EQ(a, tpe_sample(kSpace, history, 15, options));
  options.seed = 8;
  EXPECT_NE(a, tpe_sample(kSpace, history, 15, options));
  for (std::size_t d = 0; d < a.size(); ++d) {
    EXPECT_GE(a[d], 0.0);
    EXPECT_LE(a[d], kSpace[d].choices ? kSpace[d].choices - 1.0 : 1.0);
    if (kSpace[d].choices) {
      EXPECT_EQ(a[d], std::floor(a[d]));
    }
  }
}

TEST(TpeSampler, StartupTrialsAreUniform) {
  // Before startup_trials finished trials the history is not used.
  std::vector<TpeObservation> nine(9, TpeObservation{{0.0, 0.0, 0.0}, {0.0}, 0});
  TpeOptions options;
  EXPECT_EQ(tpe_sample(kSpace, nine, 9, options), tpe_sample(kSpace, {}, 9, options));
}

TEST(TpeSampler, AParameterSomeTrialsLackIsModelledFromTheOthers) {
  std::vector<TpeObservation> history;
  for (int t = 0; t < 20; ++t)
    history.push_back({{t % 2 ? std::nan("") : 0.1 * (t % 10)}, {static_cast<double>(t)}, 0});
  TpeOptions options;
  const auto x = tpe_sample({{0}}, history, 20, options);
  EXPECT_TRUE(x[0] >= 0 && x[0] <= 1);
}

TEST(TpeGoodTrials, OneObjectiveTakesTheBestTenthAndRungsComeFirst) {
  std::vector<TpeObservation> history;
  for (int t = 0; t < 20; ++t) history.push_back({{0.0}, {static_cast<double>(20 - t)}, 0});
  EXPECT_EQ(tpe_good_trials(history), (std::vector<std::size_t>{18, 19}));
  // Trial 3 went a rung further: it is good whatever its value; a diverged trial (inf) never is.
  history[3].rung = 1;
  history[3].values = {100.0};
  history[19].values = {INFINITY};
  EXPECT_EQ(tpe_good_trials(history), (std::vector<std::size_t>{3, 18}));
}

TEST(TpeGoodTrials, TwoObjectivesTakeTheFirstFrontCutByHypervolume) {
  // The front (loss, ms): (1, 9) (2, 5) (2.5, 4.9) (9, 1); then dominated points.
  // With 30 trials, 3 are good: (2, 5), then the two extremes add the most
  // hypervolume; (2.5, 4.9) adds less next to (2, 5).
  std::vector<TpeObservation> history;
  const std::vector<std::vector<double>> front = {{1, 9}, {2, 5}, {2.5, 4.9}, {9, 1}};
  for (const auto& v : front) history.push_back({{0.0}, v, 0});
  for (int t = 0; t < 26; ++t) history.push_back({{0.0}, {10.0 + t, 10.0 + t}, 0});
  EXPECT_EQ(tpe_good_trials(history), (std::vector<std::size_t>{0, 1, 3}));
}

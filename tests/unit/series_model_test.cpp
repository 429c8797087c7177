// The run plots' numbers without a window (ui/plot/series_model): the
// debiased EMA, each metric as drawn, a resumed run's clock, and seed
// replicas' mean and standard deviation, against values worked out by hand.
#include "ui/plot/series_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using commtune::ui::Ema;
using commtune::ui::GroupSeries;
using commtune::ui::LiveMetric;
using commtune::ui::LivePoint;
using commtune::ui::SeriesModel;
using commtune::ui::SeedGroup;
using commtune::ui::group_label;

namespace {

LivePoint loss_point(std::int64_t run_id, std::int64_t step, double loss, double wall_s = 0) {
  LivePoint p;
  p.run_id = run_id;
  p.step = step;
  p.loss = loss;
  p.wall_s = wall_s;
  return p;
}

double drawn(const SeriesModel::Appended& a, LiveMetric metric) { return a.drawn[static_cast<std::size_t>(metric)]; }

}  // namespace

TEST(Ema, IsDebiasedSoTheFirstPointIsItself) {
  // weight 0.5 over 1, 2, 4: the weights of the points so far, newest first,
  // are 1, 0.5, 0.25, so the averages are 1, (0.5 + 2) / 1.5 and (0.25 + 1 + 4) / 1.75.
  Ema ema(0.5);
  EXPECT_DOUBLE_EQ(ema.add(1), 1.0);
  EXPECT_DOUBLE_EQ(ema.add(2), 2.5 / 1.5);
  EXPECT_DOUBLE_EQ(ema.add(4), 3.0);
}

TEST(Ema, PassesValuesThroughAtWeightZeroAndNonFiniteOnesAlways) {
  Ema raw;
  EXPECT_EQ(raw.add(7.25), 7.25);
  EXPECT_EQ(raw.add(-3), -3.0);

  Ema ema(0.5);
  EXPECT_DOUBLE_EQ(ema.add(1), 1.0);
  EXPECT_TRUE(std::isnan(ema.add(std::numeric_limits<double>::quiet_NaN())));  // a diverged step stays visible
  EXPECT_EQ(ema.add(std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(ema.add(2), 2.5 / 1.5);  // as if neither had come
}

TEST(SeriesModel, SmoothsEveryMetricButTheStepFunctions) {
  SeriesModel model;
  model.set_smoothing(0.5);
  ASSERT_TRUE(model.add_run(1, "1 powersgd"));
  EXPECT_FALSE(model.add_run(1, "1 again"));
  LivePoint p = loss_point(1, 0, 1.0);
  p.forward_s = 0.5;
  p.wire_bytes = 2e6;
  p.uncompressed_bytes = 4e6;
  const auto first = model.append(p);
  ASSERT_TRUE(first);
  EXPECT_EQ(drawn(*first, LiveMetric::Loss), 1.0);
  EXPECT_EQ(drawn(*first, LiveMetric::ForwardMs), 500.0);
  p = loss_point(1, 1, 2.0);
  p.forward_s = 1.5;
  p.wire_bytes = 1e6;
  p.uncompressed_bytes = 4e6;
  const auto second = model.append(p);
  ASSERT_TRUE(second);
  EXPECT_DOUBLE_EQ(drawn(*second, LiveMetric::Loss), 2.5 / 1.5);
  EXPECT_DOUBLE_EQ(drawn(*second, LiveMetric::ForwardMs), (0.5 * 500 + 1500) / 1.5);
  EXPECT_EQ(drawn(*second, LiveMetric::Ratio), 4.0);  // not (0.5 * 2 + 4) / 1.5
  EXPECT_EQ(drawn(*second, LiveMetric::WireMb), 1.0);
  EXPECT_EQ(model.points(1).size(), 2u);
  EXPECT_EQ(model.points(1)[1].loss, 2.0);  // stored as it came

  EXPECT_FALSE(model.append(loss_point(1, 1, 9.0)));  // a step it has: a resumed run repeats it
  EXPECT_FALSE(model.append(loss_point(2, 0, 9.0)));  // an unknown run
  EXPECT_EQ(model.points(1).size(), 2u);
  EXPECT_TRUE(model.points(2).empty());
}

TEST(SeriesModel, TakenPointsAppendedAgainAreSmoothedAnew) {
  SeriesModel model;
  model.add_run(1, "1");
  for (int step = 0; step < 3; ++step) model.append(loss_point(1, step, 1 << step));  // 1, 2, 4
  model.set_smoothing(0.5);
  const auto points = model.take_points(1);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_TRUE(model.points(1).empty());
  std::vector<double> losses;
  for (const auto& p : points) losses.push_back(drawn(*model.append(p), LiveMetric::Loss));
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_DOUBLE_EQ(losses[0], 1.0);
  EXPECT_DOUBLE_EQ(losses[1], 2.5 / 1.5);
  EXPECT_DOUBLE_EQ(losses[2], 3.0);
}

TEST(SeriesModel, AResumedLaunchsClockGoesOnFromTheLastPoint) {
  SeriesModel model;
  model.add_run(1, "1");
  for (int step = 0; step < 3; ++step) model.append(loss_point(1, step, 1, step));  // 0, 1, 2 s
  // The next launch counts from 0 again: 0.5 s in it is at 2 s (the last point's time), 1.5 s at 3 s.
  EXPECT_EQ(model.append(loss_point(1, 3, 1, 0.5))->point.wall_s, 2.0);
  EXPECT_EQ(model.append(loss_point(1, 4, 1, 1.5))->point.wall_s, 3.0);
  EXPECT_EQ(model.points(1).back().wall_s, 3.0);
}

TEST(SeriesModel, TruncatesAndMergesByStep) {
  SeriesModel model;
  model.add_run(1, "1");
  for (int step = 0; step < 4; ++step) model.append(loss_point(1, step, step));
  EXPECT_FALSE(model.truncate(1, 4));  // nothing from step 4 on
  EXPECT_TRUE(model.truncate(1, 2));
  ASSERT_EQ(model.points(1).size(), 2u);
  EXPECT_EQ(model.points(1).back().step, 1);

  EXPECT_FALSE(model.merge(1, {}));
  EXPECT_TRUE(model.merge(1, {loss_point(1, 6, 60), loss_point(1, 0, 99), loss_point(1, 4, 40)}));
  const auto& points = model.points(1);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].step, 0);
  EXPECT_EQ(points[0].loss, 0.0);  // a step it had keeps its point
  EXPECT_EQ(points[1].step, 1);
  EXPECT_EQ(points[2].step, 4);
  EXPECT_EQ(points[3].step, 6);
}

TEST(SeriesModel, GroupsRunsThatDifferOnlyInTheirSeed) {
  SeriesModel model;
  model.add_run(1, "1 lr=0.1 seed=0");
  model.add_run(2, "2 lr=0.1 seed=1");
  model.add_run(3, "3 lr=0.2 seed=0");
  model.add_run(4, "4 lr=0.2");  // no seed: not a replica
  model.add_run(5, "5  lr=0.1 seed=2");
  const auto groups = model.seed_groups();
  ASSERT_EQ(groups.size(), 1u);  // lr=0.2 has a single seed
  EXPECT_EQ(groups[0].key, "lr=0.1");
  EXPECT_EQ(groups[0].runs, (std::vector<std::int64_t>{1, 2, 5}));
}

// Runs grouped by any parameter, as W&B groups them: the runs that share its value.
TEST(SeriesModel, GroupsRunsByAnyParameterTheirLabelsOrValuesName) {
  SeriesModel model;
  model.add_run(1, "1 rank=1 lr=0.1 seed=0");
  model.add_run(2, "2 rank=4 lr=0.1 seed=0");
  model.add_run(3, "3 rank=1 lr=0.2 seed=0");
  model.add_run(4, "4 rank=4 lr=0.2 seed=0");
  model.add_run(5, "5 allreduce", {{"lr", "0.1"}});  // the values given, not the label's words
  model.add_run(6, "6 allreduce");                   // no lr: drawn on its own
  // What tells the runs apart: not the seed, the same for every run that names it.
  EXPECT_EQ(model.group_parameters(), (std::vector<std::string>{"rank", "lr"}));
  const auto by_lr = model.groups_by("lr");
  ASSERT_EQ(by_lr.size(), 2u);
  EXPECT_EQ(by_lr[0].key, "lr=0.1");
  EXPECT_EQ(by_lr[0].runs, (std::vector<std::int64_t>{1, 2, 5}));
  EXPECT_EQ(group_label(by_lr[0]), "lr=0.1 (3 runs)");
  EXPECT_EQ(by_lr[1].runs, (std::vector<std::int64_t>{3, 4}));
  const auto by_rank = model.groups_by("rank");
  ASSERT_EQ(by_rank.size(), 2u);
  EXPECT_EQ(by_rank[1].key, "rank=4");
  // A value that one run alone has is no group; seeds are the replicas' grouping.
  model.add_run(7, "7 rank=16 lr=0.3");
  EXPECT_EQ(model.groups_by("rank").size(), 2u);
  EXPECT_EQ(model.groups_by("").size(), 0u);  // "": by seed, and no configuration here has two
  EXPECT_EQ(group_label(SeedGroup{"lr=0.1", {1, 2}}), "lr=0.1 (2 seeds)");
}

TEST(GroupSeries, MeanAndSampleSdOverTheStepsEveryReplicaReached) {
  SeriesModel model;
  model.add_run(1, "1 lr=0.1 seed=0");
  model.add_run(2, "2 lr=0.1 seed=1");
  // Replica 1 reaches three steps, replica 2 two.
  model.append(loss_point(1, 10, 1, 1));
  model.append(loss_point(1, 20, 3, 2));
  model.append(loss_point(1, 30, 5, 3));
  model.append(loss_point(2, 10, 3, 3));
  model.append(loss_point(2, 20, 7, 4));
  GroupSeries group(model.seed_groups().at(0));

  auto update = group.advance(model, false);
  EXPECT_TRUE(update.restarted);
  ASSERT_EQ(update.points.size(), 2u);  // not step 30: replica 2 has not reached it
  // 1 and 3: mean 2, sd sqrt(((1 - 2)^2 + (3 - 2)^2) / (2 - 1)) = sqrt(2).
  EXPECT_EQ(update.points[0].x, 10.0);
  EXPECT_DOUBLE_EQ(update.points[0].mean, 2.0);
  EXPECT_DOUBLE_EQ(update.points[0].sd, std::sqrt(2.0));
  // 3 and 7: mean 5, sd sqrt(4 + 4) = sqrt(8).
  EXPECT_EQ(update.points[1].x, 20.0);
  EXPECT_DOUBLE_EQ(update.points[1].mean, 5.0);
  EXPECT_DOUBLE_EQ(update.points[1].sd, std::sqrt(8.0));

  update = group.advance(model, false);  // nothing new
  EXPECT_FALSE(update.restarted);
  EXPECT_TRUE(update.points.empty());

  model.append(loss_point(2, 30, 5, 5));  // replica 2 reaches step 30: only it comes
  update = group.advance(model, false);
  EXPECT_FALSE(update.restarted);
  ASSERT_EQ(update.points.size(), 1u);
  EXPECT_EQ(update.points[0].x, 30.0);
  EXPECT_DOUBLE_EQ(update.points[0].mean, 5.0);
  EXPECT_EQ(update.points[0].sd, 0.0);

  // Against time: the replicas' mean wall time, from the first step again.
  update = group.advance(model, true);
  EXPECT_TRUE(update.restarted);
  ASSERT_EQ(update.points.size(), 3u);
  EXPECT_DOUBLE_EQ(update.points[0].x, 2.0);
  EXPECT_DOUBLE_EQ(update.points[1].x, 3.0);
  EXPECT_DOUBLE_EQ(update.points[2].x, 4.0);
}

TEST(GroupSeries, SmoothsMeanAndSdEachOnItsOwnAndStartsAgainWhenAReplicaShrinks) {
  SeriesModel model;
  model.add_run(1, "1 seed=0");
  model.add_run(2, "2 seed=1");
  const double losses[2][3] = {{1, 3, 5}, {3, 7, 5}};  // means 2, 5, 5; sds sqrt(2), sqrt(8), 0
  for (int run = 0; run < 2; ++run)
    for (int step = 0; step < 3; ++step) model.append(loss_point(run + 1, step, losses[run][step]));
  GroupSeries group(model.seed_groups().at(0));
  EXPECT_EQ(group.advance(model, false).points.size(), 3u);

  model.set_smoothing(0.5);  // the weights of the steps so far, newest first: 1, 0.5, 0.25
  auto update = group.advance(model, false);
  EXPECT_TRUE(update.restarted);
  ASSERT_EQ(update.points.size(), 3u);
  const double root2 = std::sqrt(2.0);
  EXPECT_NEAR(update.points[0].mean, 2.0, 1e-12);
  EXPECT_NEAR(update.points[1].mean, (0.5 * 2 + 5) / 1.5, 1e-12);
  EXPECT_NEAR(update.points[2].mean, (0.25 * 2 + 0.5 * 5 + 5) / 1.75, 1e-12);
  EXPECT_NEAR(update.points[0].sd, root2, 1e-12);
  EXPECT_NEAR(update.points[1].sd, (0.5 * root2 + 2 * root2) / 1.5, 1e-12);
  EXPECT_NEAR(update.points[2].sd, (0.25 * root2 + 0.5 * 2 * root2 + 0) / 1.75, 1e-12);

  model.truncate(2, 1);  // replica 2 back to one step
  update = group.advance(model, false);
  EXPECT_TRUE(update.restarted);
  ASSERT_EQ(update.points.size(), 1u);
  EXPECT_NEAR(update.points[0].mean, 2.0, 1e-12);

  group.restart();  // a replica's points were replaced
  update = group.advance(model, false);
  EXPECT_TRUE(update.restarted);
  EXPECT_EQ(update.points.size(), 1u);
}

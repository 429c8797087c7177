// What the run plots draw, before any widget: each run's points as they
// came, every metric smoothed as TensorBoard smooths, and seed replicas
// aggregated step by step into a mean and a standard deviation. No Qt, so
// its arithmetic is tested without a window.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ui/live/live_feed.h"

namespace commtune::ui {

// TensorBoard's smoothing: an exponential moving average divided by
// 1 - weight^n, so the first points are not pulled towards 0. Non-finite
// values pass through (a diverged step stays visible) without entering it.
class Ema {
 public:
  explicit Ema(double weight = 0) : weight_(weight) {}
  // The smoothed value once `value` is in; `value` itself at weight 0.
  double add(double value);

 private:
  double weight_;
  double ema_ = 0;
  int count_ = 0;
};

// Replicas of one configuration: runs whose labels are equal but for their
// id and a seed=N word; or the runs that share one parameter's value.
struct SeedGroup {
  std::string key;  // the label they share, or "lr=0.1"
  std::vector<std::int64_t> runs;
  std::string unit = "seeds";  // what its runs are: "seeds", or "runs" (grouped by a parameter)
};
// How the legend and the readout name a group: "lr=0.1 (3 seeds)", "lr=0.1 (4 runs)".
std::string group_label(const SeedGroup& group);

class SeriesModel {
 public:
  static constexpr std::size_t kMetrics = static_cast<std::size_t>(LiveMetric::Count);
  // A point as the run's curves draw it.
  struct Appended {
    LivePoint point;                     // as stored: its wall time goes on from the launch before
    std::array<double, kMetrics> drawn;  // by LiveMetric: smoothed, but for the ratio and the bytes
  };

  // False when the run is there already. `values`: its parameters' values,
  // else the label's parameter=value words.
  bool add_run(std::int64_t run_id, std::string label,
               std::vector<std::pair<std::string, std::string>> values = {});
  bool has_run(std::int64_t run_id) const;
  void clear();
  // The EMA weight in [0, 1) of the points appended from now on; take_points()
  // and append them again to smooth a run's earlier points with it.
  void set_smoothing(double weight) { smoothing_ = weight; }
  double smoothing() const { return smoothing_; }
  // Nothing for an unknown run, or for a step that is not after the run's
  // last (a resumed run repeats its steps).
  std::optional<Appended> append(const LivePoint& point);
  // Forget a run's points from `step` on, or add the points of steps it does
  // not have wherever they fall; true when its points changed, which then
  // have to be taken and appended again to be drawn.
  bool truncate(std::int64_t run_id, std::int64_t step);
  bool merge(std::int64_t run_id, const std::vector<LivePoint>& points);
  // Empties the run and starts its averages and its clock again, handing
  // back its points to be appended anew.
  std::vector<LivePoint> take_points(std::int64_t run_id);
  const std::vector<LivePoint>& points(std::int64_t run_id) const;  // empty for an unknown run
  // The groups of two or more replicas, by key.
  std::vector<SeedGroup> seed_groups() const;
  // The parameters a grouping by would tell runs apart with: two values or
  // more among the runs, one of them shared by two runs or more (a group),
  // in the order they first appear.
  std::vector<std::string> group_parameters() const;
  // The runs that share a value of `param`, two or more each, in the order
  // the values first appear ("": seed_groups()).
  std::vector<SeedGroup> groups_by(const std::string& param) const;

 private:
  struct Run {
    std::int64_t id = 0;
    std::string label;
    std::vector<std::pair<std::string, std::string>> values;
    std::vector<LivePoint> points;
    double wall_offset = 0;  // a resumed launch's clock restarts: its points go on after the last one
    std::array<Ema, kMetrics> ema;
  };
  Run* find(std::int64_t run_id);
  const Run* find(std::int64_t run_id) const;

  std::vector<Run> runs_;
  double smoothing_ = 0;
};

// A seed group's mean and standard deviation over its replicas at each step
// they have all reached, smoothed as the runs' curves are. Each call goes on
// from the steps aggregated before (a redraw of every step at every frame
// took a 30-trial sweep's frame to 200 ms).
class GroupSeries {
 public:
  struct Point {
    double x;     // the step, or the replicas' mean wall time
    double mean;  // smoothed
    double sd;    // smoothed on its own: the band is mean +- sd
  };
  struct Update {
    bool restarted = false;     // from the first step: what was drawn before goes
    std::vector<Point> points;  // the steps aggregated by this call
  };

  explicit GroupSeries(SeedGroup group) : group_(std::move(group)) {}
  const SeedGroup& group() const { return group_; }
  // From the first step again at the next advance() (a replica's points were replaced).
  void restart() { restart_ = true; }
  // It starts again by itself when the x axis, the model's smoothing or a
  // replica's length went back.
  Update advance(const SeriesModel& model, bool by_wall);

 private:
  SeedGroup group_;
  bool restart_ = true;
  bool by_wall_ = false;
  double smoothing_ = 0;
  std::size_t steps_ = 0;  // aggregated so far
  Ema mean_, sd_;
};

}  // namespace commtune::ui

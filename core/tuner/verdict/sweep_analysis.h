// A sweep (or every measured run of a store) analysed once, for the
// Analysis page to draw and the CLI's recommend to agree with: each run's
// loss, bytes and step time with its configuration's seeds, its step time
// predicted on a chosen cluster, each swept parameter's share of the loss's
// variance, and, for every preset network, the recommendation that
// `recommend --network NAME` prints (the same Evidence, options and verdict).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tuner/netmodel/cost_model.h"
#include "core/tuner/sweep/param_importance.h"
#include "core/tuner/verdict/evidence.h"

namespace commtune {

namespace db {
class Store;
}

struct AnalysedRun {
  std::int64_t run_id = 0;
  std::optional<std::int64_t> trial;  // its number in the sweep (db::trial_number)
  std::string label;                  // run_label()
  double loss = 0;    // its tail loss (NaN: diverged)
  std::optional<double> wire_mb, step_ms;
  std::optional<double> predicted_ms;  // on the query's link: a point (the intervals are recommend's)
  bool baseline = false;  // its configuration is the allreduce baseline
  // Its configuration: the runs that differ from it only in their seed.
  std::int64_t configuration_run = 0;  // the configuration's first run (0: none found)
  int seeds = 1;
  double loss_mean = 0, loss_sd = NAN;  // over the seeds (sd: two seeds or more)
  std::map<std::string, std::string> axis_values;  // swept parameter -> value as the CLI prints it

  // The run that stands for its configuration (plots draw a configuration once).
  std::int64_t configuration() const { return configuration_run ? configuration_run : run_id; }
};

// The configuration's tail loss as every plot's readout gives it: "tail loss
// 2.2022" for one seed, "mean tail loss of 2 seeds 2.1607 ± 0.056" for more
// (the figure plots draw for it), "diverged" when it is not finite.
std::string tail_loss_text(const AnalysedRun& run);

// recommend() on one preset network, as `recommend --network NAME` gives it.
struct NetworkAdvice {
  std::string network;  // the cluster described
  // The allreduce run the verdict compares with (the chosen configuration's,
  // at its own settings outside the hook, else the first) and its step time.
  std::optional<std::int64_t> baseline_run;
  std::optional<double> baseline_ms, best_ms;
  std::optional<Estimate> speedup;
  std::optional<std::int64_t> best_run;
  std::string best;  // "12 powersgd r4", or "keep allreduce"
  std::string verdict;
  // The fastest predicted candidates but the baselines, first first: "run 12 powersgd r4, 2.31 ms: chosen", or
  // why not; at most kShownReasons of them (a sweep of 10^5 trials lists its rest with `recommend`).
  static constexpr std::size_t kShownReasons = 20;
  std::vector<std::string> reasons;
  std::size_t reasons_left = 0;  // the candidates beyond those
  // For each SlowMo configuration among the runs, whether it pays off on this
  // network ("run 7: SlowMo on 10gbit: ..."), as `predict` notes it.
  std::vector<std::string> slowmo;
};

struct SweepAnalysisQuery {
  std::int64_t sweep_id = 0;     // 0: every measured run in the store
  std::string link = "10gbit";   // the network the runs' predicted step times are for
  int nodes = 0;                 // 0: one per rank of the run
  int ranks_per_node = 1;
  TargetCompute compute;         // the target's compute (default: as measured)
  double tolerance = 0.01;       // the recommendation's relative loss tolerance
};

struct SweepAnalysis {
  std::int64_t sweep_id = 0;  // the query's: 0 for every measured run in the store
  std::vector<AnalysedRun> runs;
  std::vector<NetworkAdvice> networks;  // one per preset network, when a baseline is among the runs
  std::vector<std::string> axes;        // the sweep's swept parameters
  std::set<std::string> log_axes;       // those its spec draws on a log scale
  ImportanceResult importance;
  std::string note;        // why something is missing
  std::string run_to_run;  // the run-to-run spread the intervals include, as `recommend` prints it
};

SweepAnalysis analyse_sweep(const db::Store& store, const SweepAnalysisQuery& query);

// The two swept parameters a heatmap shows first (x, y): those that the most
// runs both have, several values each, numbers before words.
std::pair<std::string, std::string> default_heatmap_axes(const SweepAnalysis& analysis);

// Swept values in their order: numbers by value, before words, words as text.
bool value_before(const std::string& a, const std::string& b);

// The loss over two swept parameters on their grid. Configurations that
// differ only in other swept parameters share a cell, which shows the best
// of them (diverged only when all of them diverged).
struct HeatmapCell {
  std::size_t x = 0, y = 0;                        // indices into the grid's xs and ys
  std::vector<const AnalysedRun*> configurations;  // one run for each, in run order
  double best = INFINITY;                          // the best mean loss among the finite ones
  int finite = 0;
  bool diverged() const { return finite == 0; }
};

struct HeatmapGrid {
  std::vector<std::string> xs, ys;  // the values, in order
  std::vector<HeatmapCell> cells;   // the cells that hold a configuration
  // Values drawn rather than gridded (random search, TPE) fill few cells of
  // their grid: then the runs themselves are the picture (a contour).
  bool gridded = true;
  int max_seeds = 1;
};

// Empty when the parameters are the same, or no run has both.
HeatmapGrid heatmap_grid(const SweepAnalysis& analysis, const std::string& x, const std::string& y);

// The loss against one swept parameter: one point per configuration (its
// seeds' mean; diverged ones left out), in the order of the value.
struct Slice {
  std::vector<const AnalysedRun*> points;
  std::vector<double> x;                // each point's place: its value, or its value's index among the categories
  std::vector<std::string> categories;  // the values, in order
  bool numeric = false;                 // every value a finite number
  double lo = INFINITY, hi = -INFINITY;  // their span, when numeric
  std::optional<std::size_t> best;       // the point with the lowest loss
};

Slice slice_of(const SweepAnalysis& analysis, const std::string& param);

}  // namespace commtune

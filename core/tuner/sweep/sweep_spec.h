// A sweep: a base configuration, axes over parameters of the one schema, how
// to pick trials from them (grid or random search), optional early stopping
// by successive halving, and how many trials run at once.
//
//   { "name": "powersgd-grid",
//     "base": { "steps": 200, "hook": {"name": "powersgd"} },
//     "axes": { "hook.matrix_approximation_rank": [1, 2, 4],
//               "hook.start_powerSGD_iter": [2, 10],
//               "optimizer.lr": {"min": 0.01, "max": 0.1, "log": true, "points": 3} },
//     "strategy": "grid",                    (or "random" / "tpe" with "trials" and "seed")
//     "baseline": true,                      (plus an allreduce trial at each value of the non-hook axes)
//     "seeds": 3,                            (every trial three times: seed, seed+1, seed+2)
//     "parallel": 1,
//     "early_stopping": {"min_steps": 20, "reduction_factor": 3} }
//
// docs/sweeps.md describes every key.
#pragma once

#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/config/run_config.h"
#include "core/tuner/schema/param_schema.h"
#include "core/tuner/sweep/tpe_sampler.h"

namespace commtune {

struct SweepAxis {
  std::string param;                   // dotted path, e.g. hook.matrix_approximation_rank
  std::vector<nlohmann::json> values;  // listed values (grid points, or choices for random search)
  // Or a range: grid takes `points` values spaced evenly (geometrically with
  // `log`); random search draws uniformly (log-uniformly).
  std::optional<double> min, max;
  bool log = false;
  std::int64_t points = 0;
};

struct SweepOptions {
  std::string name;
  std::string strategy = "grid";
  std::int64_t trials = 10;  // random search
  std::int64_t seed = 0;     // random search
  bool baseline = true;
  std::int64_t seeds = 1;                    // replicates of every trial, seeds base, base+1, ...
  bool allow_inactive_hooks = false;         // plan trials whose hook never acts (refused by default)
  std::int64_t parallel = 1;
  std::int64_t checkpoint_every = 0;
  std::int64_t max_trials = 1000;
  std::string objective = "tail_loss";  // TPE: tail_loss, step_time, or tail_loss,step_time
  std::string objective_network;        // step_time: "" measured here, or predicted on this network preset
  std::int64_t tpe_startup_trials = 10;
  std::int64_t tpe_candidates = 24;
  std::string backend = "local";  // local: trials run here; slurm: each trial is a SLURM job
  static Schema<SweepOptions> schema();
};

// Where and how a sweep's trials run as SLURM jobs (backend "slurm").
struct SlurmOptions {
  std::string partition;
  std::string time_limit;
  std::int64_t nodes = 1;
  std::int64_t ranks_per_node = 1;
  std::int64_t gpus_per_node = 0;
  bool requeue = false;
  std::string folder;  // shared by this machine and the nodes ("": the sweep's work folder)
  std::string worker;  // commtune-worker as the nodes see it ("": the one beside this program)
  double quiet_limit_s = 300;
  double poll_s = 1;
  std::vector<std::string> sbatch;  // more sbatch options, "--account=proj"
  static Schema<SlurmOptions> schema();
  std::int64_t world_size() const { return nodes * ranks_per_node; }
};

// Successive halving (ASHA): every trial runs to the first rung; the best
// 1/reduction_factor at each rung continue to the next. Rungs are at
// min_steps * reduction_factor^k steps, and at the base configuration's steps.
struct EarlyStoppingOptions {
  std::int64_t min_steps = 0;  // 0: no early stopping
  double reduction_factor = 3;
  // What trials are ranked by at a rung (lower is better): tail_loss (the
  // loss, as run_metrics.h's tail_loss), or step_time (the median step time
  // of the steps since the previous rung: for sweeps over knobs that leave
  // the loss alone, such as bucket sizes).
  std::string metric = "tail_loss";
  static Schema<EarlyStoppingOptions> schema();
  bool enabled() const { return min_steps > 0; }
  std::vector<std::int64_t> rungs(std::int64_t max_steps) const;
};

struct SweepSpec {
  SweepOptions options;
  EarlyStoppingOptions early_stopping;
  SlurmOptions slurm;
  nlohmann::json base = nlohmann::json::object();  // a raw run configuration
  std::vector<SweepAxis> axes;

  // Validates everything, including every trial's configuration. Throws
  // ConfigError naming the field (axes.hook.matrix_approximation_rank, ...).
  static SweepSpec parse(const nlohmann::json& spec);
  // parse, and for a sweep about to be created the plan guard too: unless
  // allow_inactive_hooks, a sweep with a trial whose hook would not change
  // what goes on the wire within its steps (PowerSGD or post-local SGD
  // starting at or after them, or after the first rung of early stopping; a
  // compressor's minimum size above every bucket; PowerSGD finding no matrix
  // worth compressing) is refused naming the field. Stored sweeps are read
  // with parse alone.
  static SweepSpec parse_new(const nlohmann::json& spec);
  nlohmann::json to_json() const;
};

struct PlannedTrial {
  std::int64_t index = 0;
  std::string label;                                    // "matrix_approximation_rank=2 start_powerSGD_iter=10"
  nlohmann::json overrides = nlohmann::json::object();  // axis values, by parameter path
  RunConfig config;
  bool baseline = false;
  bool to_draw = false;  // TPE: the base configuration until the trial starts and its values are drawn
};

// How many trials the axes give (the grid's product, or random search's
// draws), counted without planning them; saturates instead of overflowing.
std::int64_t count_trials(const SweepSpec& spec);

// The trials of a sweep, in order; deterministic for a spec: the
// baselines first (one per combination of the values the non-hook axes
// take, each with every seed), then the trials, each seed after seed.
std::vector<PlannedTrial> plan_trials(const SweepSpec& spec);
// The same trials handed to `visit` one at a time, keeping none: a plan of
// 10^6 trials costs one trial and 16 bytes per trial (to plan each run
// once), however it is printed or stored.
void for_each_trial(const SweepSpec& spec, const std::function<void(const PlannedTrial&)>& visit);
std::int64_t planned_trial_count(const SweepSpec& spec);

// The parameters of the spec's axes that are outside the hook section.
std::vector<std::string> non_hook_axes(const SweepSpec& spec);

// A trial at a position: per axis, an index into its listed values, or a
// fraction of its range (log-scaled when the axis is). Throws ConfigError
// when the values do not make a valid configuration.
PlannedTrial trial_at(const SweepSpec& spec, const std::vector<double>& position);
// Where a trial's configuration lies along each axis (NaN where it lacks
// the parameter): trial_at's inverse, up to rounding of integers.
std::vector<double> position_of(const SweepSpec& spec, const nlohmann::json& config);
// The axes as TPE sees them.
std::vector<TpeDimension> tpe_dimensions(const SweepSpec& spec);

}  // namespace commtune

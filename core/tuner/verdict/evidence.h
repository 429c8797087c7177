// What a set of stored runs can support, with its uncertainty: the figures
// behind `predict`, `recommend`, `compare` and the Analysis page.
//
// - Configurations: runs that differ only in their seed, on one host and
//   link, are one configuration, replicated; its loss is the mean over
//   seeds, with the spread.
// - Fair baselines: each configuration is compared with the plain-allreduce
//   configuration that has the same value of every parameter outside the
//   hook (learning rate, batch, optimizer, steps, ...), seed by seed where
//   both ran it. A learning-rate effect is never read as a hook's.
// - Compute that does not depend on the machine's mood: runs of the same
//   model, data, batch and ranks share one compute profile (data, forward,
//   backward without the hook's work, optimizer), pooled over all of their
//   steady steps; only what the hook changes (its own work, bytes, calls,
//   local collective times, when buckets are ready) stays per configuration,
//   its times brought to the pool's speed by the ratio of the pool's forward
//   + backward to the run's own (a run measured on a busy machine measured
//   its collectives slowly too).
// - Intervals: every predicted figure is a point and a 95% interval from a
//   bootstrap that resamples the pool's runs and steps and each
//   configuration's runs and steps; a speedup is the ratio within each
//   replicate, so the shared compute cancels as it should.
// - Run-to-run noise: resampling one run's steps cannot see how much the
//   next run would differ, and on a shared machine the time outside compute
//   (collectives, waiting for a peer, the hook's work) differs between runs
//   far more than between steps. Configurations run more than once measure
//   it; a configuration with one run has its time outside compute scaled
//   in each replicate by a draw from that spread (RunToRun).
//
// No Qt: the CLI and the desktop app read the same verdicts.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/config/hook_activity.h"
#include "core/tuner/netmodel/cost_model.h"
#include "core/tuner/netmodel/run_samples.h"
#include "db/store.h"

namespace commtune {

// A figure and its 95% interval (both ends NaN when there is no interval).
struct Estimate {
  double value = NAN;
  double low = NAN, high = NAN;
  bool has_interval() const { return !std::isnan(low) && !std::isnan(high); }
  // True when the interval holds x (or, without an interval, when the value is x).
  bool includes(double x) const;
  nlohmann::json to_json() const;  // {"value", "low", "high"}
};

// The relative change of a configuration's tail loss from its baseline's,
// (config - baseline) / |baseline|, from seeds both ran (paired), with a
// Student t interval when there are at least two pairs.
struct LossChange {
  Estimate change;
  int pairs = 0;  // seeds both configurations ran
  enum class Judgement { Within, Beyond, Uncertain };
  // Against a tolerance: within when the whole interval is at most the
  // tolerance, beyond when all of it is above, uncertain when it straddles
  // it. With one pair the point decides (and says the spread is unknown).
  Judgement judge(double tolerance) const;
  // "+0.31% (95%: -0.52..+1.14%, 3 seeds)" or "+0.31% (one seed: spread unknown)".
  std::string describe() const;
};

struct Configuration {
  std::vector<std::int64_t> runs;  // in id order
  std::vector<std::int64_t> seeds;
  std::vector<std::optional<double>> tail_losses;  // per run (infinite when it diverged)
  std::vector<std::string> statuses;
  std::string label;  // the first run's name, or its hook
  std::string hook;   // "powersgd (fp16 wrapper)"
  nlohmann::json config;  // its first run's; null unless EvidenceOptions::configurations
  bool plain_allreduce = false;
  HookActivity activity;  // when its hook starts to change what goes on the wire
  std::int64_t steps_requested = 0;
  std::string fingerprint_family;  // model and data (the seed left out), as an identity key
  std::string host;                // where its runs ran
  net::LinkProbe link;             // the link its first run probed

  bool all_succeeded() const;
  // One tail loss per seed, by seed: runs of one seed are one observation
  // (training is deterministic, so a repeat adds no information about the
  // spread; repeats that differ are averaged). Infinite when one diverged.
  std::map<std::int64_t, double> seed_losses() const;
  std::size_t seed_count() const;  // the distinct seeds among its runs
  // Mean and sample standard deviation over seed_losses() (sd NaN with one seed).
  double mean_loss() const;
  double loss_sd() const;
};

// How much a run's time outside compute varies from one run to the next of
// the same configuration (seed and learning rate do not change it): the
// standard deviation of its logarithm, from the runs of configurations run
// more than once, blended with an assumed spread worth kAssumedWeight
// degrees of freedom so that one repeated pair cannot make it vanish.
struct RunToRun {
  // Measured with `bench/run_to_run.sh` beside `stress-ng --cpu 2` on the
  // 2-core development machine (bench/RESULTS.md): a loaded machine's spread.
  static constexpr double kAssumedLogSd = 0.35;
  static constexpr double kAssumedWeight = 2;

  double log_sd = kAssumedLogSd;  // the one the intervals use
  double measured_log_sd = NAN;   // NaN: no configuration was run more than once
  int degrees_of_freedom = 0;     // repeated runs less one per configuration
  int repeated_runs = 0;

  // From each run's log time outside compute, grouped by what makes runs timing replicates.
  static RunToRun from_groups(const std::map<std::string, std::vector<double>>& log_times);
  // "run-to-run spread of the time outside compute: x1.42 (assumed: no configuration here ran twice)"
  std::string describe() const;
  nlohmann::json to_json() const;
};

struct EvidenceOptions {
  int replicates = 200;     // bootstrap replicates behind every interval
  std::uint64_t seed = 0;   // the bootstrap's: the same store gives the same verdicts
  // Whether to read the runs' steps for the step-time figures. Without them
  // (a comparison of losses) configurations, baselines and loss changes are
  // the same, and every configuration's profile_problem says it was not read.
  bool profiles = true;
  // Whether each configuration keeps a copy of its first run's
  // configuration (Configuration::config), which differences_outside_hook,
  // inactive_reason and the profiles read: a comparison of losses reads
  // none, and 10^5 copies cost a second to make and free. Kept whenever
  // profiles are read.
  bool configurations = true;
};

class Evidence {
 public:
  // Reads the runs (all steps of each, once). A run that cannot be profiled
  // (too few steps, an older store) still counts for its loss.
  static Evidence gather(const db::Store& store, const std::vector<std::int64_t>& run_ids,
                         const EvidenceOptions& options = {});
  // The same, for runs already read.
  static Evidence gather(const db::Store& store, const std::vector<db::RunRecord>& runs,
                         const EvidenceOptions& options = {});
  // The same, taking each configuration's JSON from the runs instead of
  // copying it (10^5 trees): the runs' configurations are left null.
  static Evidence gather(const db::Store& store, std::vector<db::RunRecord>&& runs,
                         const EvidenceOptions& options = {});

  const std::vector<Configuration>& configurations() const { return configurations_; }
  // The configuration holding a run.
  std::optional<std::size_t> configuration_of(std::int64_t run_id) const;
  // The plain-allreduce configuration with the same values of every
  // parameter outside the hook, measured on the same host and link;
  // nullopt when the runs have none.
  std::optional<std::size_t> baseline_of(std::size_t config) const;
  // Why it has none ("" when it has one): no such allreduce run, or the one
  // there is ran on another host or probed another link.
  const std::string& baseline_problem(std::size_t config) const;
  // What differs between a configuration and another outside their hooks
  // ("optimizer.lr 0.1 vs 0.05"); "" when nothing does.
  std::string differences_outside_hook(std::size_t a, std::size_t b) const;

  // Why a configuration has no step-time figures ("" when it has them).
  const std::string& profile_problem(std::size_t config) const;
  // Its profile with the pooled compute (the one every prediction uses).
  const RunProfile& profile(std::size_t config) const;
  // The pooled compute's description: "pooled over 31 runs ... (median of 1860 steps)".
  std::string compute_source(std::size_t config) const;

  // Whether a figure comes with its 95% interval: drawing one costs
  // EvidenceOptions::replicates profiles of the configuration (and of its
  // baseline), so a reader of 10^5 configurations draws them only for
  // those it must judge.
  enum class Interval { Drawn, PointOnly };
  Estimate predicted_step_s(std::size_t config, const net::Cluster& cluster, const TargetCompute& compute,
                            Interval interval = Interval::Drawn) const;
  // baseline's predicted step / config's, replicate by replicate.
  Estimate speedup(std::size_t config, std::size_t baseline, const net::Cluster& cluster, const TargetCompute& compute,
                   Interval interval = Interval::Drawn) const;
  LossChange loss_change(std::size_t config, std::size_t baseline) const;
  // "" when the configuration's hook acted on the wire during the steps its
  // figures come from; else why not (it never compressed, it switched on
  // late). Plain allreduce variants always act. Without a baseline only its
  // schedule can tell (whether it compressed needs allreduce's bytes).
  std::string inactive_reason(std::size_t config, std::optional<std::size_t> baseline) const;
  // The run-to-run spread its single-run intervals include.
  const RunToRun& run_to_run() const { return run_to_run_; }
  // Mean bytes per step and rank over the steady steps of its runs.
  double wire_bytes_per_step(std::size_t config) const;
  // The steady steps its figures use: [first, last] of its runs.
  std::pair<std::int64_t, std::int64_t> steady_steps(std::size_t config) const;

 private:
  // `runs`, whose configurations are moved from `movable` (the same runs) when it is not null.
  static Evidence gather(const db::Store& store, const std::vector<db::RunRecord>& runs,
                         std::vector<db::RunRecord>* movable, const EvidenceOptions& options);
  struct Pool {  // the compute shared by runs of one model, data, batch and ranks
    std::vector<std::pair<std::size_t, std::size_t>> members;  // (configuration, run within it)
    std::size_t steps = 0;
    // data, forward, pure backward, optimizer: the point and each replicate
    std::array<double, 4> point{};
    std::vector<std::array<double, 4>> replicates;
  };
  struct Figures {
    std::string problem;
    std::vector<RunSamples> samples;  // per run of the configuration (empty when it cannot be profiled)
    std::size_t pool = 0;
    RunProfile point;
  };
  // A configuration's bootstrap replicates, drawn the first time an
  // interval asks for them and kept (drawn for all 10^5 configurations of a
  // sweep they would fill gigabytes); safe to ask from several threads.
  const std::vector<RunProfile>& replicate_profiles(std::size_t config) const;
  std::vector<RunProfile> draw_replicates(std::size_t config) const;
  struct Drawn {
    std::once_flag once;
    std::vector<RunProfile> profiles;
  };

  std::vector<Configuration> configurations_;
  std::vector<Figures> figures_;
  std::vector<Pool> pools_;
  mutable std::vector<std::unique_ptr<Drawn>> drawn_;  // per configuration
  std::map<std::int64_t, std::size_t> config_of_run_;
  std::vector<std::optional<std::size_t>> baseline_of_;  // per configuration, found once
  std::vector<std::string> baseline_problem_;           // per configuration: why it has no baseline
  // Per configuration: a number alike exactly when the baseline keys (and
  // steps) are, so that configurations alike outside the hook are known so.
  std::vector<std::size_t> baseline_group_;
  RunToRun run_to_run_;
  EvidenceOptions options_;
};

// The configuration as identity keys (opaque texts, alike exactly when those
// parts of the configurations' JSON texts are): what makes runs replicates of one
// configuration (everything but the seed and the bookkeeping: checkpoints,
// debug output), what a baseline must share (that, without the hook), and
// what shares one compute profile (model, data, ranks, device, threads,
// optimizer kind).
std::string replicate_key(const nlohmann::json& config);
std::string baseline_key(const nlohmann::json& config);
std::string compute_key(const nlohmann::json& config);
// What makes runs timing replicates: the configuration without its seed and
// learning rate, which change the numbers but not the work.
std::string timing_key(const nlohmann::json& config);

// Two-sided 95% Student t quantile for `df` degrees of freedom.
double t_quantile_95(int df);

}  // namespace commtune

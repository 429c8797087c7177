// Runs a sweep's trials, one after another on all devices or several at
// once on disjoint shares of the cores (CPU) or GPUs, with successive
// halving when the spec asks. Every decision is in the store: a failed trial
// is recorded and the sweep goes on; a sweep whose process died resumes where
// it stopped, continuing an interrupted trial from its last checkpoint and
// never running a finished one again.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/launch/launcher.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/sweep/sweep_spec.h"
#include "db/writer.h"

namespace commtune {

// A trial starting or finishing a segment (a run up to a rung).
struct TrialEvent {
  bool finished = false;
  std::int64_t sweep_id = 0;
  std::int64_t trial = 0;
  std::int64_t trials = 0;
  std::int64_t run_id = 0;
  std::string label;
  std::int64_t from_step = 0;
  std::int64_t to_step = 0;
  bool final_rung = true;
  // When finished:
  std::string status;  // the run's status in the store
  RunDigest digest;    // the run's figures as stored so far
  nlohmann::json summary;
};

struct SweepRunOptions {
  db::Writer* store = nullptr;
  std::string work_dir;                       // trials' checkpoints go to <work_dir>/sweep-<id>/trial-<n>
  const std::atomic<bool>* cancel = nullptr;  // stops the sweep
  // Optional: a flag that stops one trial's segment while the sweep goes on
  // (it should be set as well when `cancel` is). Without it, `cancel` stops
  // the running trials.
  std::function<const std::atomic<bool>*(const TrialEvent&)> trial_cancel;
  bool echo_worker_output = false;
  // Called from the threads that run trials, one call at a time.
  std::function<void(const TrialEvent&)> on_trial;
  // Extra subscribers for one segment's events (a progress line, a GUI adapter).
  std::function<std::vector<std::unique_ptr<EventSubscriber>>(const TrialEvent&)> subscribers;
};

struct SweepOutcome {
  std::int64_t sweep_id = 0;
  std::string status;                         // succeeded (all trials ended), cancelled
  std::map<std::string, int> trial_statuses;  // how many trials ended how
};

// Stores a new sweep and its planned trials (as pending runs), in one
// transaction, streaming them from the plan; returns its id, and the number
// of trials in `trials` when given.
std::int64_t create_sweep(const SweepSpec& spec, db::Writer& store, std::int64_t* trials = nullptr);

// Runs (or resumes) a stored sweep until every trial has ended or `cancel`
// is set. Throws db::Error or ConfigError before running anything when the
// sweep cannot run (unknown, already finished, running in another process).
SweepOutcome run_sweep(std::int64_t sweep_id, const SweepRunOptions& options);

}  // namespace commtune

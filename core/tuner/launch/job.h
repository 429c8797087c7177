// One training job from a configuration to a stored result: resolves the
// world size, launches the workers, summarises the run, and records it in the
// run store. The CLI's `run`, the sweep scheduler and the GUI all start runs
// through here.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/config/run_config.h"
#include "core/tuner/launch/launcher.h"
#include "core/tuner/launch/run_report.h"
#include "db/writer.h"

namespace commtune {

struct JobRequest {
  RunConfig config;
  std::vector<EventSubscriber*> subscribers;             // besides the summary and the store
  std::vector<std::vector<int>> rank_cpus;               // cores per rank; empty: from config.run.cpu_affinity
  std::vector<std::pair<std::string, std::string>> env;  // extra worker environment (e.g. CUDA_VISIBLE_DEVICES)
  bool echo_worker_output = false;
  const std::atomic<bool>* cancel = nullptr;
  // A sweep's own stop. A run that `cancel` ends while this is not set was
  // stopped on its own (one trial, the sweep goes on): stored as stopped for
  // good in the same write as its end, so no reader sees it cancelled first.
  const std::atomic<bool>* cancels_all = nullptr;
  // Called once the stored run's id is known, before anything is launched:
  // a subscriber that needs the id (a live view keyed by run).
  std::function<std::unique_ptr<EventSubscriber>(std::int64_t run_id)> subscriber_for_run;

  // Where to record the run (null: nowhere). A new stored run gets `name`
  // and, in a sweep, its sweep and trial; `continue_run` instead records
  // into an existing run (one resumed from a checkpoint).
  db::Writer* store = nullptr;
  std::string name;
  std::optional<std::int64_t> sweep_id;
  std::optional<std::int64_t> trial;
  std::optional<std::int64_t> continue_run;
  // When the store stops writing (a full disk): stop the run, which fails
  // saying why (the default), or train on unrecorded, warned on stderr.
  bool train_without_store = false;
  // What the components check in code was asked of the engine already (a
  // sweep's plan asks for all its trials at once); else run_job asks.
  bool engine_checked = false;
};

struct JobResult {
  RunOutcome outcome;
  nlohmann::json summary;  // RunSummary::to_json, plus "run_id" when stored
  std::optional<std::int64_t> run_id;
};

// Validates what can only be checked once the world size is known. Throws
// ConfigError naming the field.
int job_world_size(const RunConfig& config);

// What run_job checks before it stores anything: the world size, then what
// the engine says of the configuration, or, for a script, that the file is
// there and its Python's torch is 2.4 or later. Throws ConfigError naming the field.
void check_job(const RunConfig& config);

// Blocks until the run ends. Throws ConfigError or db::Error before anything
// is launched; once workers run, every outcome is a result.
JobResult run_job(const JobRequest& request);

// The store's status for a launch outcome.
std::string stored_status(RunStatus status);

// Whether a cancelled run was stopped on its own (see JobRequest::cancels_all).
bool stopped_alone(const RunOutcome& outcome, const std::atomic<bool>* cancels_all);

// Stores how a run ended: its status, reason, counters and summary
// (`summary_json`, from `summary`). `prior_wall_s`: the run's wall time
// before this launch; `stopped_alone`: stored as stopped rather than cancelled.
void record_run_end(db::Writer& store, std::int64_t run_id, const RunOutcome& outcome, const RunSummary& summary,
                    const nlohmann::json& summary_json, double prior_wall_s = 0, bool stopped_alone = false);

}  // namespace commtune

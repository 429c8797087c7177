// Runs one job on this machine: hosts the rendezvous store, spawns one
// commtune-worker per rank with torchrun's environment, streams their events
// to subscribers, and on any rank's failure stops the others and reports which
// rank failed and why. Workers die with the launcher, even on SIGKILL.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/events/event_subscriber.h"

namespace commtune {

struct LaunchOptions {
  nlohmann::json config;  // a validated configuration (RunConfig::to_json())
  int world_size = 2;
  std::string worker_path;                               // commtune-worker
  std::chrono::milliseconds kill_grace{2000};            // SIGTERM -> SIGKILL
  bool echo_worker_output = false;                       // copy workers' output to stderr, prefixed
  std::vector<std::vector<int>> rank_cpus;               // per rank, the cores it may run on (empty: any)
  std::vector<std::pair<std::string, std::string>> env;  // extra environment for the workers
  // Polled while the ranks run: a non-empty answer stops them, and the run
  // fails with it as the reason (the store that records it stopped writing).
  std::function<std::string()> abort_reason;
};

// Diverged: a rank's loss (or gradient norm) became NaN or infinite; a
// result to report, never a success.
enum class RunStatus { Succeeded, Failed, Cancelled, Diverged };
// The exit code of a worker, and of the CLI, for a diverged run.
inline constexpr int kExitDiverged = 3;
const char* to_string(RunStatus status);

// The first non-finite number a rank reported.
struct NonfiniteReport {
  std::int64_t step = 0;
  std::string what;   // "loss", or the hook statistic (residual_norm, ...)
  std::string value;  // "nan", "inf" or "-inf"
};

struct RankOutcome {
  int rank = 0;
  int pid = 0;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool stopped_by_launcher = false;
  bool reported_end = false;
  std::string error_kind;  // from its error event: config, communication, runtime
  std::string error;
  std::optional<NonfiniteReport> nonfinite;
  std::vector<std::string> output_tail;  // its last lines of stdout/stderr
};

// What a rank's event says of how it ends (run_end, error, nonfinite), as
// the launcher and `summarize` both read it.
void note_rank_event(RankOutcome& rank, const events::Event& event);

struct RunOutcome {
  RunStatus status = RunStatus::Failed;
  std::optional<int> failed_rank;
  std::string reason;  // one line for humans
  std::vector<RankOutcome> ranks;
  double wall_s = 0;

  nlohmann::json to_json() const;
  // The blamed rank's first non-finite number, when the run diverged; else null.
  nlohmann::json nonfinite_json() const;
};

// Makes the outcome diverged, blaming the rank that went non-finite first
// (earliest step, then lowest rank), if any did: divergence explains the
// other ranks' failures, not the other way round. Returns whether it did.
bool mark_divergence(RunOutcome& outcome);

// Blocks until every worker has exited. Setting `*cancel` stops the run.
RunOutcome launch(const LaunchOptions& options, const std::vector<EventSubscriber*>& subscribers,
                  const std::atomic<bool>* cancel = nullptr);

// commtune-worker beside the running executable, or $COMMTUNE_WORKER.
std::string default_worker_path();

// The cores this process may run on.
std::vector<int> allowed_cores();

// Splits `cores` (default: allowed_cores()) into `parts` equal, disjoint
// shares; empty when there are fewer cores than parts.
std::vector<std::vector<int>> split_cores(int parts, std::vector<int> cores = allowed_cores());

}  // namespace commtune

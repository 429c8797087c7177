// A run as a SLURM job: the configuration and an sbatch script are written
// to a folder every node sees, the job is submitted, and the event files its
// ranks write there are streamed into the store as they grow (as `import
// --follow` does). The job's id is stored with the run before anything else,
// so a process that dies while the job runs is replaced by one that finds the
// job again (queued, running or ended) instead of submitting it twice. A job
// that SLURM ends early (failed, timed out, preempted, cancelled) ends the run
// as failed with SLURM's reason; a job SLURM requeues is followed into its
// new attempt.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tuner/config/run_config.h"
#include "core/tuner/launch/job.h"

namespace commtune {

struct SlurmPlan {
  std::int64_t nodes = 1;
  std::int64_t ranks_per_node = 1;
  std::int64_t gpus_per_node = 0;
  std::string partition;   // "": the cluster's default
  std::string time_limit;  // "": the partition's (SLURM's forms: minutes, HH:MM:SS, D-HH:MM:SS)
  bool requeue = false;    // let SLURM requeue the job after a preemption or node failure
  std::vector<std::string> sbatch_options;  // more "--key=value" lines
  std::chrono::milliseconds quiet_limit{std::chrono::minutes(5)};  // a running rank silent this long is given up
  std::chrono::milliseconds poll{std::chrono::seconds(1)};        // how often SLURM is asked about the job
};

struct SlurmJobRequest {
  RunConfig config;  // its world size is the plan's nodes x ranks_per_node
  SlurmPlan plan;
  std::string folder;    // the job's own folder, shared with the nodes
  std::string job_name;  // unique to this run and segment: found again by it when the id was not stored
  std::string worker_path;  // commtune-worker as the nodes see it
  std::vector<EventSubscriber*> subscribers;  // besides the summary and the store
  const std::atomic<bool>* cancel = nullptr;  // cancels the job (scancel)
  const std::atomic<bool>* cancels_all = nullptr;  // as JobRequest's
  db::Writer* store = nullptr;                // required: the run is recorded there
  std::int64_t run_id = 0;                    // the stored run it continues
};

// Blocks until the job has ended and its events are in the store. Throws
// ConfigError or std::runtime_error before anything is submitted (sbatch
// missing or refusing the job).
JobResult run_slurm_job(const SlurmJobRequest& request);

// What SLURM says of a job; `known` is false once SLURM has forgotten it.
struct SlurmJobState {
  bool known = false;
  std::string state;   // PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, PREEMPTED, NODE_FAIL, ...
  std::string reason;  // SLURM's Reason field
  std::string exit_code;  // "0:0"
  int restarts = 0;
  bool ended() const;
};
SlurmJobState slurm_job_state(const std::string& job_id);

// The last line of a job's output (slurm-JOBID.out in `folder`), which says
// why it ended when no rank could. srun's own lines say less than a rank's
// error, unless srun failed after the last such line (a step it could not
// launch): then its error follows ("; then srun: error: ..."). "" without output.
std::string slurm_output_ending(const std::string& folder, const std::string& job_id);

}  // namespace commtune

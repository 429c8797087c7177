#include "core/tuner/launch/slurm_job.h"

#include <pwd.h>
#include <unistd.h>

#include <ctime>
#include <map>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/tuner/export/launch_scripts.h"
#include "core/tuner/io/command.h"
#include "core/tuner/io/input_file.h"
#include "core/tuner/launch/event_files.h"
#include "core/tuner/launch/run_report.h"
#include "core/tuner/store/run_recorder.h"

namespace commtune {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kToolTimeout = std::chrono::seconds(60);
constexpr const char* kJobEvent = "slurm_job";

std::string user_name() {
  if (const auto* pw = ::getpwuid(::getuid())) return pw->pw_name;
  return std::to_string(::getuid());
}

// "JobId=12 JobName=x ... JobState=RUNNING Reason=None ..." (scontrol -o): the fields by name.
std::map<std::string, std::string> scontrol_fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::size_t at = 0;
  while (at < line.size()) {
    const auto end = std::min(line.find_first_of(" \n", at), line.size());  // -o: one line, ending in '\n'
    const auto token = line.substr(at, end - at);
    if (const auto eq = token.find('='); eq != std::string::npos) out[token.substr(0, eq)] = token.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

void scancel(const std::string& job_id) {
  try {
    run_command({"scancel", job_id}, kToolTimeout);
  } catch (const std::exception&) {  // the caller reports the run's end either way
  }
}

// The job this run's segment was submitted as: from the store (the id
// recorded right after sbatch answered), else by its unique name (sbatch
// answered, the process died before recording it). "" when there is none.
std::string recorded_job(const SlurmJobRequest& r) {
  const auto events = r.store->call([id = r.run_id](db::Store& s) { return s.events(id, kJobEvent); }).get();
  for (auto e = events.rbegin(); e != events.rend(); ++e)
    if (e->body.value("folder", "") == r.folder) return e->body.value("job_id", "");
  const auto found = run_command(
      {"squeue", "-h", "--states=all", "--user=" + user_name(), "--name=" + r.job_name, "-o", "%i"}, kToolTimeout);
  if (!found.ok()) throw std::runtime_error("squeue cannot list the jobs: " + found.problem());
  const auto id = found.out.substr(0, found.out.find('\n'));
  return id.find_first_not_of("0123456789") == std::string::npos ? id : "";
}

// That job, when it is still to be followed: queued, running, or completed
// with its files whole. One that failed, was cancelled or is forgotten is
// submitted anew (from the trial's last checkpoint, as a local trial resumes).
std::string job_to_follow(const SlurmJobRequest& r) {
  const auto id = recorded_job(r);
  if (id.empty()) return "";
  const auto state = slurm_job_state(id);
  return state.known && (!state.ended() || state.state == "COMPLETED") ? id : "";
}

void record_job(const SlurmJobRequest& r, const std::string& job_id) {
  db::EventRow row;
  row.run_id = r.run_id;
  row.time = static_cast<double>(std::time(nullptr));
  row.kind = kJobEvent;
  row.body = {{"job_id", job_id}, {"folder", r.folder}, {"job_name", r.job_name}};
  r.store->call([row](db::Store& s) { s.insert(row); }).get();
  r.store->flush();
}

std::string submit(const SlurmJobRequest& r) {
  std::error_code ignored;
  fs::remove_all(fs::path(r.folder) / "events", ignored);  // a half-written segment's files are not this job's
  LaunchPlan launch;
  launch.nodes = static_cast<int>(r.plan.nodes);
  launch.ranks_per_node = static_cast<int>(r.plan.ranks_per_node);
  launch.name = r.job_name;
  launch.sbatch_options = r.plan.sbatch_options;
  if (!r.plan.partition.empty()) launch.sbatch_options.push_back("--partition=" + r.plan.partition);
  if (!r.plan.time_limit.empty()) launch.sbatch_options.push_back("--time=" + r.plan.time_limit);
  if (r.plan.gpus_per_node > 0) launch.sbatch_options.push_back("--gpus-per-node=" + std::to_string(r.plan.gpus_per_node));
  launch.sbatch_options.push_back(r.plan.requeue ? "--requeue" : "--no-requeue");
  launch.sbatch_options.push_back("--output=" + (fs::path(r.folder) / "slurm-%j.out").string());
  write_launch_scripts(r.config.to_json(), launch, r.folder);
  // From the job's folder: the script finds run.json and events/ in the folder sbatch ran in.
  const auto submitted = run_command({"sbatch", "--parsable", "launch.sbatch"}, kToolTimeout,
                                     {{"COMMTUNE_WORKER", r.worker_path}}, r.folder);
  const auto id = submitted.out.substr(0, submitted.out.find_first_of(";\n"));
  if (!submitted.ok() || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("sbatch did not take the job: " + submitted.problem());
  record_job(r, id);
  return id;
}

std::string describe(const SlurmJobRequest& r, const std::string& job_id, const SlurmJobState& s) {
  if (!s.known) return "SLURM job " + job_id + " is no longer known to SLURM";
  auto text = "SLURM job " + job_id + " ended " + s.state;
  if (!s.reason.empty() && s.reason != "None") text += " (" + s.reason + ")";
  if (!s.exit_code.empty()) text += ", exit code " + s.exit_code;
  if (s.state != "COMPLETED")
    if (const auto line = slurm_output_ending(r.folder, job_id); !line.empty()) text += "; its output ends: " + line;
  return text;
}

bool cancelled(const SlurmJobRequest& r) { return r.cancel && r.cancel->load(); }

// A requeued job shows its previous attempt's end (FAILED, CANCELLED) for a
// moment before SLURM queues it again: an end within this long of the
// requeue is not taken as the job's.
constexpr auto kRequeueSettle = std::chrono::seconds(30);

// Waits until the job runs (or has ended): through the queue, and for a
// requeued job (`requeued_at`) through the end of its previous attempt.
SlurmJobState wait_to_run(const SlurmJobRequest& r, const std::string& job_id,
                          std::optional<Clock::time_point> requeued_at = std::nullopt) {
  while (true) {
    const auto s = slurm_job_state(job_id);
    const bool settling = requeued_at && s.known && Clock::now() - *requeued_at < kRequeueSettle;
    if (cancelled(r) || s.state == "RUNNING" || (s.ended() && !settling)) return s;
    std::this_thread::sleep_for(r.plan.poll);
  }
}

}  // namespace

bool SlurmJobState::ended() const {
  static const std::set<std::string> kEnded = {"COMPLETED", "CANCELLED", "FAILED",        "TIMEOUT",
                                               "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",     "DEADLINE",
                                               "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"};
  return !known || kEnded.count(state) > 0;
}

SlurmJobState slurm_job_state(const std::string& job_id) {
  SlurmJobState out;
  const auto shown = run_command({"scontrol", "-o", "show", "job", job_id}, kToolTimeout);
  if (!shown.ok()) {
    // A job the controller has forgotten; any other answer (a controller
    // restarting) leaves the state unknown for now, not ended.
    out.known = shown.err.find("Invalid job id") == std::string::npos;
    return out;
  }
  const auto fields = scontrol_fields(shown.out);
  out.known = true;
  auto get = [&](const char* key) {
    const auto f = fields.find(key);
    return f == fields.end() ? std::string() : f->second;
  };
  out.state = get("JobState");
  out.reason = get("Reason");
  out.exit_code = get("ExitCode");
  const auto restarts = get("Restarts");
  out.restarts = restarts.empty() ? 0 : std::atoi(restarts.c_str());
  return out;
}

JobResult run_slurm_job(const SlurmJobRequest& r) {
  if (!r.store) throw std::invalid_argument("run_slurm_job needs the run store");
  const int world_size = static_cast<int>(r.plan.nodes * r.plan.ranks_per_node);
  if (r.config.run.world_size != world_size)
    throw ConfigError("world_size", "is " + std::to_string(r.config.run.world_size) + "; the SLURM job has " +
                                        std::to_string(world_size) + " ranks (nodes x ranks_per_node)");
  r.config.check_world_size(world_size);

  JobResult result;
  result.run_id = r.run_id;
  const double prior_wall_s = r.store
                                  ->call([id = r.run_id](db::Store& s) {
                                    const auto run = s.run(id);
                                    if (!run) throw db::Error("no run " + std::to_string(id) + " in the store");
                                    s.start_run(id);
                                    return run->wall_s;
                                  })
                                  .get();
  auto job_id = job_to_follow(r);
  if (job_id.empty()) job_id = submit(r);

  auto state = wait_to_run(r, job_id);
  int attempt = state.restarts;
  RunOutcome outcome;
  nlohmann::json config = r.config.to_json();
  std::unique_ptr<RunSummary> summary;
  while (true) {
    // Each attempt (a requeued job starts over) streams from its own folder.
    summary = std::make_unique<RunSummary>(world_size);
    RunRecorder recorder(*r.store, r.run_id, prior_wall_s, RunRecorder::WallClock::StepTimes);
    std::vector<EventSubscriber*> subscribers{summary.get(), &recorder};
    subscribers.insert(subscribers.end(), r.subscribers.begin(), r.subscribers.end());
    EventFilesOptions options;
    const auto events = fs::path(r.folder) / "events";
    options.paths = {(attempt == 0 ? events : events / ("restart-" + std::to_string(attempt))).string()};
    options.follow = true;
    options.quiet_limit = r.plan.quiet_limit;
    options.cancel = r.cancel;
    bool requeued = false;
    auto asked = Clock::now() - r.plan.poll;
    options.abort_reason = [&]() -> std::string {
      if (Clock::now() - asked < r.plan.poll) return "";
      asked = Clock::now();
      state = slurm_job_state(job_id);
      if (state.known && state.restarts > attempt) {
        requeued = true;
        return "SLURM requeued job " + job_id;
      }
      return state.ended() ? describe(r, job_id, state) : "";
    };
    if (cancelled(r)) {
      outcome.status = RunStatus::Cancelled;
      break;
    }
    auto run = read_event_files(options, subscribers);
    outcome = run.outcome;
    if (run.config.is_object() && !run.config.empty()) config = run.config;
    if (!requeued || outcome.status == RunStatus::Succeeded) break;
    state = wait_to_run(r, job_id, Clock::now());
    attempt = state.restarts;
  }
  if (outcome.status == RunStatus::Cancelled) {
    scancel(job_id);
    outcome.reason = "cancelled: SLURM job " + job_id + " was cancelled (scancel)";
  } else if (outcome.status != RunStatus::Succeeded && !state.ended()) {
    scancel(job_id);  // given up (its ranks fell silent): the job must not hold its nodes
  }
  result.outcome = outcome;
  result.summary = summary->to_json(outcome, config);
  result.summary["slurm_job"] = job_id;
  record_run_end(*r.store, r.run_id, outcome, *summary, result.summary, prior_wall_s,
                 stopped_alone(outcome, r.cancels_all));
  result.summary["run_id"] = r.run_id;
  return result;
}

std::string slurm_output_ending(const std::string& folder, const std::string& job_id) {
  // Only its end, and only from a regular file: the folder is the user's, and
  // a FIFO or a link to /dev/zero there must not stop the sweep.
  const auto tail = read_regular_file_tail((fs::path(folder) / ("slurm-" + job_id + ".out")).string(), 4096);
  std::string last, srun_error_after;
  std::size_t at = 0;
  while (at < tail.size()) {
    const auto end = std::min(tail.find('\n', at), tail.size());
    const auto line = tail.substr(at, end - at);
    if (line.rfind("srun: error: ", 0) == 0)
      srun_error_after = line;
    else if (!line.empty() && line.rfind("srun: ", 0) != 0) {
      last = line;
      srun_error_after.clear();
    }
    at = end + 1;
  }
  if (srun_error_after.empty()) return last;
  return last.empty() ? srun_error_after : last + "; then " + srun_error_after;
}

}  // namespace commtune

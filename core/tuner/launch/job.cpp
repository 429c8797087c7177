#include "core/tuner/launch/job.h"

#include <cmath>
#include <cstdio>
#include <memory>

#include "core/tuner/config/engine_check.h"
#include "core/tuner/launch/gpus.h"
#include "core/tuner/launch/run_end.h"
#include "core/tuner/launch/run_report.h"
#include "core/tuner/launch/script_job.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/store/run_recorder.h"

namespace commtune {

int job_world_size(const RunConfig& config) {
  const int world_size = resolve_world_size(config.run.world_size, config.run.device);
  config.check_world_size(world_size);
  constexpr int kMaxRanksPerCore = 4;
  const int cores = static_cast<int>(allowed_cores().size());
  const bool on_cpu = config.run.device == "cpu" || visible_gpus() == 0;
  if (on_cpu && !config.run.oversubscribe && world_size > kMaxRanksPerCore * std::max(1, cores))
    throw ConfigError("world_size", "is " + std::to_string(world_size) + ": more than " +
                                        std::to_string(kMaxRanksPerCore) + " ranks per core on the " +
                                        std::to_string(cores) + " cores this process may use; set oversubscribe=true "
                                        "to start that many processes anyway");
  return world_size;
}

std::string stored_status(RunStatus status) {
  switch (status) {
    case RunStatus::Succeeded:
      return db::status::kSucceeded;
    case RunStatus::Cancelled:
      return db::status::kCancelled;
    case RunStatus::Failed:
      return db::status::kFailed;
    case RunStatus::Diverged:
      return db::status::kDiverged;
  }
  return db::status::kFailed;
}

void check_job(const RunConfig& config) {
  job_world_size(config);
  if (config.script.enabled())
    check_script(config.script);
  else
    check_in_the_engine(config);
}

JobResult run_job(const JobRequest& request) {
  const auto& config = request.config;
  LaunchOptions options;
  options.config = config.to_json();
  options.world_size = job_world_size(config);
  const bool script = config.script.enabled();
  if (!request.engine_checked && !script) check_in_the_engine(config);
  if (script) check_script(config.script);
  options.worker_path = default_worker_path();
  options.echo_worker_output = request.echo_worker_output;
  options.env = request.env;
  options.rank_cpus = request.rank_cpus;
  if (options.rank_cpus.empty() && config.run.cpu_affinity == "cores" && visible_gpus() == 0 && !script)
    options.rank_cpus = split_cores(options.world_size);

  JobResult result;
  double prior_wall_s = 0;
  std::unique_ptr<RunRecorder> recorder;
  if (request.store) {
    if (request.continue_run) {
      const auto id = *request.continue_run;
      prior_wall_s = request.store
                         ->call([id](db::Store& store) {
                           const auto run = store.run(id);
                           if (!run) throw db::Error("no run " + std::to_string(id) + " in the store");
                           store.start_run(id);
                           return run->wall_s;
                         })
                         .get();
      result.run_id = id;
    } else {
      db::NewRun run;
      run.sweep_id = request.sweep_id;
      run.trial = request.trial;
      run.name = request.name;
      run.config = options.config;
      run.world_size = options.world_size;
      run.steps_requested = config.run.steps;
      run.fingerprint = run_fingerprint(config);
      result.run_id = request.store->call([run](db::Store& store) { return store.create_run(run); }).get();
    }
    recorder = std::make_unique<RunRecorder>(*request.store, *result.run_id, prior_wall_s);
  }

  RunSummary summary(options.world_size);
  std::vector<EventSubscriber*> subscribers{&summary};
  if (recorder) subscribers.push_back(recorder.get());
  subscribers.insert(subscribers.end(), request.subscribers.begin(), request.subscribers.end());
  std::unique_ptr<EventSubscriber> run_subscriber;
  if (request.subscriber_for_run && result.run_id) {
    run_subscriber = request.subscriber_for_run(*result.run_id);
    if (run_subscriber) subscribers.push_back(run_subscriber.get());
  }

  if (request.store) {
    auto warned = std::make_shared<bool>(false);
    options.abort_reason = [store = request.store, go_on = request.train_without_store, warned]() -> std::string {
      const auto why = store->error();
      if (why.empty()) return "";
      if (!go_on) return "the run store " + store->path() + " stopped writing (" + why + "): the run was stopped";
      if (!*warned)
        std::fprintf(stderr,
                     "commtune: WARNING: the run store %s stopped writing (%s); the run trains on and NOTHING more "
                     "of it is recorded\n",
                     store->path().c_str(), why.c_str());
      *warned = true;
      return "";
    };
  }
  try {
    if (script) {
      ScriptLaunch launch;
      launch.config = options.config;
      launch.script = config.script;
      launch.world_size = options.world_size;
      launch.steps = config.run.steps;
      launch.threads = config.run.threads;
      launch.env = options.env;
      launch.echo_output = options.echo_worker_output;
      launch.abort_reason = options.abort_reason;
      result.outcome = launch_script(launch, subscribers, request.cancel);
    } else {
      result.outcome = launch(options, subscribers, request.cancel);
    }
  } catch (const std::exception& e) {
    result.outcome.status = RunStatus::Failed;
    result.outcome.reason = std::string("could not launch: ") + e.what();
  }
  if (request.store) {
    // Rows queued before the writer failed count as lost only once its thread
    // reaches them: wait for that, or the count falls short of what was sent.
    try {
      request.store->flush();
    } catch (const db::Error&) {
    }
    if (const auto lost = request.store->stats().lost_step_rows; lost > 0)
      result.outcome.reason += "; " + std::to_string(lost) + " step rows the ranks sent were not stored";
  }
  result.summary = summary.to_json(result.outcome, options.config);

  if (request.store && result.run_id) {
    record_run_end(*request.store, *result.run_id, result.outcome, summary, result.summary, prior_wall_s,
                   stopped_alone(result.outcome, request.cancels_all));
    result.summary["run_id"] = *result.run_id;
  }
  return result;
}

bool stopped_alone(const RunOutcome& outcome, const std::atomic<bool>* cancels_all) {
  return outcome.status == RunStatus::Cancelled && cancels_all && !cancels_all->load();
}

void record_run_end(db::Writer& store, std::int64_t run_id, const RunOutcome& outcome, const RunSummary& summary,
                    const nlohmann::json& summary_json, double prior_wall_s, bool stopped_alone) {
  db::RunEnd end;
  end.status = stopped_alone ? db::status::kStopped : stored_status(outcome.status);
  end.reason = stopped_alone ? "stopped by the user; the sweep went on" : outcome.reason;
  end.steps_completed = summary_json["steps"].value("completed", std::int64_t{0});
  end.final_loss = summary.last_loss();
  end.wall_s = prior_wall_s + outcome.wall_s;
  end.summary = summary_json;
  if (store.error().empty()) {
    store.call([run_id, end](db::Store& s) { finish_run_with_digest(s, run_id, end); });
    try {
      store.flush();
      return;
    } catch (const db::Error&) {
    }
  }
  // The writer stopped (a full disk): one last try on a connection of its
  // own, which a disk with room again lets through. Else the run stays
  // running until the next process that opens the store marks it interrupted.
  try {
    db::Store direct(store.path());
    finish_run_with_digest(direct, run_id, end);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commtune: the end of run %lld could not be recorded: %s\n", static_cast<long long>(run_id),
                 e.what());
  }
}

}  // namespace commtune

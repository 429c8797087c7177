// `run`: one training job on this machine, reported live and kept in the run
// store. `summarize`: the same report from event files that workers wrote
// under torchrun or srun; `import`: such a run into the store, live with
// --follow. `stop`: asks whichever process records a run to stop it.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/config/hook_activity.h"
#include "core/tuner/launch/event_files.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/job.h"
#include "core/tuner/launch/run_report.h"
#include "core/tuner/store/run_recorder.h"
#include "core/tuner/store/stop_requests.h"

namespace commtune::cli {
namespace {

struct RunArgs {
  std::string config_path, summary_path, metrics_path, name, on_store_error = "stop";
  std::vector<std::string> overrides;
  ScriptArgs script;
  bool quiet = false, verbose = false, no_store = false;
};

void print_conclusion(const nlohmann::json& s) {
  std::string line = "commtune: " + s.value("status", "");
  if (s.contains("reason")) line += " (" + printable(s["reason"].get<std::string>()) + ")";  // an imported rank's error text
  if (s.contains("steps"))
    line += ": " + std::to_string(s["steps"].value("completed", 0LL)) + "/" +
            std::to_string(s["steps"].value("requested", 0LL)) + " steps in " + format("%.1f", s.value("wall_s", 0.0)) +
            " s";
  if (const auto initial = summary_number(s, "/loss/initial"), final_loss = summary_number(s, "/loss/final");
      initial && final_loss)
    line += ", loss " + format("%.4f", *initial) + " -> " + format("%.4f", *final_loss);
  if (const auto ms = summary_number(s, "/step_time_ms/median")) line += ", " + format("%.2f", *ms) + " ms/step";
  if (const auto wire = summary_number(s, "/traffic/wire_bytes_per_step"))
    line += ", " + format("%.3f", *wire / 1e6) + " MB/step on the wire";
  std::fprintf(stderr, "%s\n", printable(line).c_str());
}

// Returns whether the summary was written.
bool write_summary(const nlohmann::json& summary, const std::string& path) {
  if (path.empty()) {
    std::cout << summary.dump(2) << std::endl;
    return static_cast<bool>(std::cout);
  }
  try {
    write_file_whole(path, summary.dump(2) + "\n");
    return true;
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "commtune: cannot write the summary: %s\n", printable(e.what()).c_str());
    return false;
  }
}

// "stored as run N", unless the store stopped writing partway: then what it holds of the run is not all of it.
void say_where_stored(const db::Writer& store, std::int64_t run_id) {
  if (const auto error = store.error(); !error.empty())
    std::fprintf(stderr, "commtune: run %lld in %s holds only what was written before the store stopped writing\n",
                 static_cast<long long>(run_id), printable(store.path()).c_str());
  else
    std::fprintf(stderr, "commtune: stored as run %lld in %s\n", static_cast<long long>(run_id),
                 printable(store.path()).c_str());
}

// Puts the metrics file in place (when asked for one); returns whether it is there.
bool commit_metrics(MetricsFile* metrics) {
  if (!metrics) return true;
  try {
    metrics->commit();
    return true;
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "commtune: cannot write the metrics: %s\n", printable(e.what()).c_str());
    return false;
  }
}

int run_command(const RunArgs& args, const Context& context) {
  watch_stop_signals();  // from here a signal cancels the run, even one before its workers start
  auto raw = load_raw_config(args.config_path, args.overrides);
  apply_script_args(raw, args.script);
  const auto config = RunConfig::parse(raw);
  const int world_size = job_world_size(config);
  if (const auto warning = hook_inactivity_warning(config.to_json()); !warning.empty())
    std::fprintf(stderr, "commtune: warning: %s\n", warning.c_str());

  std::unique_ptr<db::Writer> store;
  if (!args.no_store) store = open_writer(context.db);
  ProgressLine progress(world_size, config.run.steps);
  std::unique_ptr<MetricsFile> metrics;
  JobRequest request;
  request.config = config;
  request.echo_worker_output = args.verbose;
  request.store = store.get();
  request.name = args.name;
  request.train_without_store = args.on_store_error == "continue";
  if (!args.quiet) request.subscribers.push_back(&progress);
  if (!args.metrics_path.empty()) {
    metrics = std::make_unique<MetricsFile>(args.metrics_path);
    request.subscribers.push_back(metrics.get());
  }
  request.cancel = &g_stop;
  // Another process (the desktop app) may ask for this run to stop, as Ctrl-C here would.
  std::unique_ptr<StopRequestWatcher> stop_requests;
  if (store) {
    stop_requests = std::make_unique<StopRequestWatcher>(store->path(), nullptr);
    request.subscriber_for_run = [&stop_requests](std::int64_t run_id) -> std::unique_ptr<EventSubscriber> {
      stop_requests->watch(run_id, &g_stop);
      return nullptr;
    };
  }

  const auto result = run_job(request);
  progress.finish();
  const bool metrics_written = commit_metrics(metrics.get());
  const bool summary_written = write_summary(result.summary, args.summary_path) && metrics_written;
  print_conclusion(result.summary);
  if (result.run_id) say_where_stored(*store, *result.run_id);

  const auto& outcome = result.outcome;
  const RankOutcome* failed = nullptr;
  for (const auto& r : outcome.ranks)
    if (outcome.failed_rank && r.rank == *outcome.failed_rank) failed = &r;
  if (failed && failed->error.empty())
    for (const auto& line : failed->output_tail) std::fprintf(stderr, "  [rank %d] %s\n", failed->rank, line.c_str());
  if (failed && failed->error_kind == "config") return kExitConfig;
  const int code = exit_code_for(outcome);
  return code == kExitOk && !summary_written ? kExitFailed : code;
}

// Prints the conclusion of a run read from event files; returns the exit code.
int conclude_event_run(const EventFilesRun& run, const nlohmann::json& result, bool summary_written) {
  print_conclusion(result);
  const int code = exit_code_for(run.outcome);
  return code == kExitOk && !summary_written ? kExitFailed : code;
}

int summarize_command(const std::vector<std::string>& files, const std::string& summary_path,
                      const std::string& metrics_path) {
  EventFilesOptions options;
  options.paths = files;
  std::unique_ptr<MetricsFile> metrics;
  if (!metrics_path.empty()) metrics = std::make_unique<MetricsFile>(metrics_path);
  std::unique_ptr<RunSummary> summary;
  const auto run = read_event_files(options, metrics ? std::vector<EventSubscriber*>{metrics.get()}
                                                     : std::vector<EventSubscriber*>{},
                                    [&](const nlohmann::json&, int world_size) -> std::vector<EventSubscriber*> {
                                      summary = std::make_unique<RunSummary>(world_size);
                                      return {summary.get()};
                                    });
  const auto result = summary->to_json(run.outcome, run.config);
  const bool metrics_written = commit_metrics(metrics.get());
  const bool written = write_summary(result, summary_path) && metrics_written;
  return conclude_event_run(run, result, written);
}

struct ImportArgs {
  std::vector<std::string> paths;
  std::string name, summary_path;
  bool follow = false, quiet = false;
  double quiet_limit_s = 120;
};

// `import`: a run launched elsewhere (torchrun, srun) into the store, from
// its event files; with --follow while it runs, so every view shows it live.
int import_command(const ImportArgs& args, const Context& context) {
  watch_stop_signals();
  // Files are read far faster than rows are committed: a short queue keeps
  // the reading at most a second or so ahead, so Ctrl-C ends the import
  // within that and every row read before it is stored.
  db::WriterOptions paced;
  paced.max_queued = 50000;
  const auto writer = open_writer(context.db, paced);
  EventFilesOptions options;
  options.paths = args.paths;
  options.follow = args.follow;
  options.quiet_limit = std::chrono::milliseconds(static_cast<std::int64_t>(1000 * args.quiet_limit_s));
  options.cancel = &g_stop;
  // A stop request (the desktop app's Stop, `commtune-cli stop`) ends the following as Ctrl-C does.
  StopRequestWatcher stop_requests(writer->path(), nullptr);

  std::optional<std::int64_t> run_id;
  std::unique_ptr<RunSummary> summary;
  std::unique_ptr<RunRecorder> recorder;
  std::unique_ptr<ProgressLine> progress;
  const auto on_start = [&](const nlohmann::json& config, int world_size) -> std::vector<EventSubscriber*> {
    // The configuration enters the store as every other does: through the
    // schema, or not at all (nothing is stored, the files stay as they are).
    db::NewRun stored;
    stored.name = args.name.empty() ? "imported " + args.paths.front() : args.name;
    stored.world_size = world_size;
    try {
      const auto parsed = RunConfig::parse(config);
      stored.config = parsed.to_json();
      stored.steps_requested = parsed.run.steps;
      stored.fingerprint = run_fingerprint(parsed);
    } catch (const ConfigError& e) {
      throw std::runtime_error("the run's configuration in " + args.paths.front() +
                               " is not one this build runs, so it is not imported: " + e.what());
    }
    run_id = writer->call([stored](db::Store& s) { return s.create_run(stored); }).get();
    if (args.follow) stop_requests.watch(*run_id, &g_stop);
    std::fprintf(stderr, "commtune: %s run %lld in %s\n", args.follow ? "streaming into" : "importing as",
                 static_cast<long long>(*run_id), writer->path().c_str());
    summary = std::make_unique<RunSummary>(world_size);
    recorder = std::make_unique<RunRecorder>(*writer, *run_id, 0, RunRecorder::WallClock::StepTimes);
    std::vector<EventSubscriber*> subscribers{summary.get(), recorder.get()};
    if (args.follow && !args.quiet) {
      progress = std::make_unique<ProgressLine>(world_size, stored.steps_requested);
      subscribers.push_back(progress.get());
    }
    return subscribers;
  };
  EventFilesRun run;
  try {
    run = read_event_files(options, {}, on_start);
  } catch (const std::exception& e) {
    // A file that turns bad halfway: the run stored so far ends as failed, never left running.
    if (run_id) {
      RunOutcome failed;
      failed.reason = printable(e.what());
      record_run_end(*writer, *run_id, failed, *summary, summary->to_json(failed, nlohmann::json::object()));
    }
    throw;
  }
  if (progress) progress->finish();
  if (run.outcome.status == RunStatus::Cancelled)
    run.outcome.reason = args.follow ? "stopped following its event files; its ranks were started elsewhere "
                                       "(torchrun, srun) and go on until stopped there"
                                     : "the import was stopped before the end of its event files";
  const auto result = summary->to_json(run.outcome, run.config);
  record_run_end(*writer, *run_id, run.outcome, *summary, result);
  const int code =
      conclude_event_run(run, result, args.summary_path.empty() || write_summary(result, args.summary_path));
  say_where_stored(*writer, *run_id);
  return code;
}

struct StopArgs {
  std::vector<std::int64_t> runs;
  std::optional<std::int64_t> sweep;
  double wait_s = 60;
};

// What `stop` asks to stop: a run (its recording process stops it; a sweep
// goes on with its next trial) or a whole sweep (its process stops it as
// Ctrl-C would: cancelled, resumable).
struct StopTarget {
  bool sweep = false;
  std::int64_t id = 0;

  std::string name() const { return (sweep ? "sweep " : "run ") + std::to_string(id); }
};

// The target as the store shows it now: status, why it ended, who runs it.
struct TargetState {
  std::string status, reason, owner;
};

std::optional<TargetState> state_of(const db::Store& store, const StopTarget& t) {
  if (t.sweep) {
    const auto sweep = store.sweep(t.id);
    if (!sweep) return std::nullopt;
    return TargetState{sweep->status, "", sweep->owner};
  }
  const auto run = store.run(t.id);
  if (!run) return std::nullopt;
  return TargetState{run->status, run->reason, run->owner};
}

// `stop`: asks the processes that record running runs (`run`, a `sweep`'s
// trial, `import --follow`, the desktop app) or run a sweep to stop them, as
// the desktop app's Stop and Stop all do, and waits until each has.
int stop_command(const StopArgs& args, const Context& context) {
  if (args.sweep && !args.runs.empty()) throw std::invalid_argument("stop takes run ids or --sweep, not both");
  if (!args.sweep && args.runs.empty()) throw std::invalid_argument("stop needs run ids, or --sweep N");
  std::vector<StopTarget> targets;
  if (args.sweep) targets.push_back({true, *args.sweep});
  for (const auto id : args.runs) targets.push_back({false, id});

  const auto path = store_path(context.db);
  const auto store = open_store(context.db);  // a run whose process died is marked interrupted here
  const auto withdraw = [&](const StopTarget& t) {
    t.sweep ? withdraw_sweep_stop_request(path, t.id) : withdraw_stop_request(path, t.id);
  };
  int code = kExitOk;
  std::vector<StopTarget> asked;
  for (const auto& t : targets) {
    const auto state = state_of(*store, t);
    if (!state) {
      std::fprintf(stderr, "commtune: no %s in %s\n", t.name().c_str(), path.c_str());
      code = kExitFailed;
    } else if (state->status != db::status::kRunning) {
      std::fprintf(stderr, "commtune: %s is not running (%s)\n", t.name().c_str(),
                   printable(state->status).c_str());  // a shared store's text: escaped
      code = kExitFailed;
    } else {
      t.sweep ? request_sweep_stop(path, t.id) : request_stop(path, t.id);
      asked.push_back(t);
    }
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(1000 * args.wait_s));
  while (!asked.empty()) {
    for (auto it = asked.begin(); it != asked.end();) {
      const auto state = state_of(*store, *it);
      if (state && state->status == db::status::kRunning) {
        ++it;
        continue;
      }
      auto line = "commtune: " + it->name() + " " + (state ? state->status : "was deleted");
      if (state && !state->reason.empty()) line += " (" + state->reason + ")";
      std::fprintf(stderr, "%s\n", printable(line).c_str());
      it = asked.erase(it);
    }
    if (asked.empty()) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (const auto& t : asked) {
        withdraw(t);
        const auto state = state_of(*store, t);
        std::fprintf(stderr,
                     "commtune: %s still runs after %g s, so the request is withdrawn: the process running it (%s) "
                     "did not take it\n",
                     t.name().c_str(), args.wait_s, state ? printable(state->owner).c_str() : "?");
      }
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return code;
}

}  // namespace

void add_on_nonfinite_option(CLI::App& command, std::vector<std::string>& overrides) {
  command
      .add_option_function<std::string>(
          "--on-nonfinite", [&overrides](const std::string& v) { overrides.push_back("on_nonfinite=" + v); },
          "a NaN or infinite loss ends the run as diverged at once (stop, the default) or after its last step "
          "(warn); exit code 3 either way")
      ->check(CLI::IsMember({"stop", "warn"}));
}

void add_run_commands(CLI::App& app, Context& context) {
  auto args = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "run one training job on this machine, report it live and store it");
  run->add_option("-c,--config", args->config_path, "run configuration (JSON); every key is optional")
      ->check(CLI::ExistingFile);
  run->add_option("-s,--set", args->overrides,
                  "override a parameter: path=value, e.g. hook.name=fp16_compress (repeatable)")
      ->allow_extra_args(false);  // one value each: `--set a=1 -- ARGS` leaves ARGS to the script
  add_on_nonfinite_option(*run, args->overrides);
  run->add_option("-n,--name", args->name, "a name for the stored run");
  run->add_option("--summary", args->summary_path, "write the run summary (JSON) here instead of to stdout")
      ->check(output_file_problem, "FILE");
  run->add_option("--metrics", args->metrics_path, "write every rank's per-step metrics here (JSON Lines)")
      ->check(output_file_problem, "FILE");
  run->add_flag("--no-store", args->no_store, "do not record the run in the run store");
  run->add_option("--on-store-error", args->on_store_error,
                  "when the run store stops writing (a full disk): stop the run (stop, the default) or train on "
                  "without recording it (continue, warned on stderr)")
      ->check(CLI::IsMember({"stop", "continue"}));
  run->add_flag("-q,--quiet", args->quiet, "no live progress line");
  run->add_flag("-v,--verbose", args->verbose, "echo the workers' output, prefixed by rank (a script's: as torchrun prints it)");
  add_script_options(*run, args->script);
  run->callback([args, &context] { context.exit_code = run_command(*args, context); });

  struct SummarizeArgs {
    std::vector<std::string> files;
    std::string summary_path, metrics_path;
  };
  auto sargs = std::make_shared<SummarizeArgs>();
  auto* summarize = app.add_subcommand(
      "summarize", "summarize a run from the event files its workers wrote (COMMTUNE_EVENT_FILE, e.g. under torchrun)");
  summarize->add_option("files", sargs->files, "event files, one per rank")->required()->check(CLI::ExistingFile);
  summarize->add_option("--summary", sargs->summary_path, "write the summary (JSON) here instead of to stdout")
      ->check(output_file_problem, "FILE");
  summarize->add_option("--metrics", sargs->metrics_path, "write every rank's per-step metrics here (JSON Lines)")
      ->check(output_file_problem, "FILE");
  summarize->callback([sargs, &context] {
    context.exit_code = summarize_command(sargs->files, sargs->summary_path, sargs->metrics_path);
  });

  auto iargs = std::make_shared<ImportArgs>();
  auto* import = app.add_subcommand(
      "import",
      "store a run launched elsewhere (torchrun, srun) from its ranks' event files; --follow streams it while it runs");
  import->add_option("paths", iargs->paths, "event files, one per rank, or the folder they are written to")
      ->required();
  import->add_flag("-f,--follow", iargs->follow,
                   "keep reading as the ranks write, until every rank has ended (Ctrl-C stops reading, not the job)");
  import->add_option("-n,--name", iargs->name, "a name for the stored run");
  import->add_option("--quiet-after", iargs->quiet_limit_s,
                     "following: give up on ranks whose events stopped this many seconds ago (default 120)")
      ->check(number_between(0.1, 86400));
  import->add_option("--summary", iargs->summary_path, "also write the run summary (JSON) here")
      ->check(output_file_problem, "FILE");
  import->add_flag("-q,--quiet", iargs->quiet, "no live progress line");
  import->callback([iargs, &context] { context.exit_code = import_command(*iargs, context); });

  auto stop_args = std::make_shared<StopArgs>();
  auto* stop = app.add_subcommand(
      "stop", "stop running runs, from any terminal: a sweep goes on with its next trial (as the app's Stop); "
              "--sweep stops a whole sweep (as the app's Stop all)");
  stop->add_option("runs", stop_args->runs, "run ids")->check(number_between(1, 9e18));
  stop->add_option("--sweep", stop_args->sweep, "stop this sweep: cancelled, and resumable with sweep --resume")
      ->check(number_between(1, 9e18));
  stop->add_option("--wait", stop_args->wait_s,
                   "seconds to wait for each run to stop before the request is withdrawn (default 60)")
      ->check(number_between(0.1, 86400));
  stop->callback([stop_args, &context] { context.exit_code = stop_command(*stop_args, context); });
}

}  // namespace commtune::cli

// `run`: one training job on this machine, reported live and kept in the run
// store. `summarize`: the same report from event files that workers wrote
// under torchrun or srun.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/config/run_config.h"
#include "core/launch/job.h"
#include "core/launch/run_report.h"

namespace commtune::cli {
namespace {

struct RunArgs {
  std::string config_path, summary_path, metrics_path, name;
  std::vector<std::string> overrides;
  bool quiet = false, verbose = false, no_store = false;
};

void print_conclusion(const nlohmann::json& s) {
  std::string line = "commtune: " + s.value("status", "");
  if (s.contains("reason")) line += " (" + s["reason"].get<std::string>() + ")";
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
  std::ofstream out(path);
  out << summary.dump(2) << '\n';
  out.flush();
  if (!out) std::fprintf(stderr, "commtune: cannot write the summary to %s\n", path.c_str());
  return static_cast<bool>(out);
}

int run_command(const RunArgs& args, const Context& context) {
  const auto config = RunConfig::parse(load_raw_config(args.config_path, args.overrides));
  const int world_size = job_world_size(config);

  std::unique_ptr<db::Writer> store;
  if (!args.no_store) store = open_writer(context.db);
  ProgressLine progress(world_size, config.run.steps);
  std::unique_ptr<MetricsFile> metrics;
  JobRequest request;
  request.config = config;
  request.echo_worker_output = args.verbose;
  request.store = store.get();
  request.name = args.name;
  if (!args.quiet) request.subscribers.push_back(&progress);
  if (!args.metrics_path.empty()) {
    metrics = std::make_unique<MetricsFile>(args.metrics_path);
    request.subscribers.push_back(metrics.get());
  }
  watch_stop_signals();
  request.cancel = &g_stop;

  const auto result = run_job(request);
  progress.finish();
  const bool summary_written = write_summary(result.summary, args.summary_path);
  print_conclusion(result.summary);
  if (result.run_id)
    std::fprintf(stderr, "commtune: stored as run %lld in %s\n", static_cast<long long>(*result.run_id),
                 store->path().c_str());

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

// Events of every rank, in file order; the world size from their hellos.
std::pair<std::vector<events::Event>, int> read_event_files(const std::vector<std::string>& files) {
  std::vector<events::Event> all;
  int world_size = 0;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    events::Decoder decoder;
    auto events = decoder.feed(bytes);
    if (events.empty()) throw std::runtime_error(file + " holds no events");
    world_size =
        std::max<int>(world_size, static_cast<int>(std::get<events::Hello>(events.front().payload).world_size));
    for (auto& e : events) all.push_back(std::move(e));
  }
  return {std::move(all), world_size};
}

int summarize_command(const std::vector<std::string>& files, const std::string& summary_path,
                      const std::string& metrics_path) {
  const auto [all, world_size] = read_event_files(files);
  RunSummary summary(world_size);
  std::unique_ptr<MetricsFile> metrics;
  if (!metrics_path.empty()) metrics = std::make_unique<MetricsFile>(metrics_path);
  RunOutcome outcome;
  outcome.ranks.resize(world_size);
  nlohmann::json config;
  for (const auto& e : all) {
    summary.on_event(e);
    if (metrics) metrics->on_event(e);
    auto& rank = outcome.ranks.at(e.rank);
    rank.rank = e.rank;
    if (const auto* hello = std::get_if<events::Hello>(&e.payload)) rank.pid = static_cast<int>(hello->pid);
    const auto kind = e.kind();
    if (kind == "run_start" && config.is_null()) config = e.message()->value("config", nlohmann::json::object());
    note_rank_event(rank, e);
    if (kind == "run_end") {
      rank.exit_code = 0;
      outcome.wall_s = std::max(outcome.wall_s, e.message()->value("wall_s", 0.0));
    }
  }
  outcome.status = RunStatus::Succeeded;
  for (const auto& r : outcome.ranks) {
    if (r.reported_end) continue;
    outcome.status = RunStatus::Failed;
    const bool blame = !outcome.failed_rank || (!r.error.empty() && r.error_kind != "communication" &&
                                                outcome.ranks[*outcome.failed_rank].error_kind == "communication");
    if (blame) {
      outcome.failed_rank = r.rank;
      outcome.reason = "rank " + std::to_string(r.rank) +
                       " failed: " + (r.error.empty() ? std::string("its events end before the run does") : r.error);
    }
  }
  mark_divergence(outcome);
  const auto result = summary.to_json(outcome, config);
  const bool summary_written = write_summary(result, summary_path);
  print_conclusion(result);
  const int code = exit_code_for(outcome);
  return code == kExitOk && !summary_written ? kExitFailed : code;
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
                  "override a parameter: path=value, e.g. hook.name=fp16_compress (repeatable)");
  add_on_nonfinite_option(*run, args->overrides);
  run->add_option("-n,--name", args->name, "a name for the stored run");
  run->add_option("--summary", args->summary_path, "write the run summary (JSON) here instead of to stdout")
      ->check(output_file_problem, "FILE");
  run->add_option("--metrics", args->metrics_path, "write every rank's per-step metrics here (JSON Lines)")
      ->check(output_file_problem, "FILE");
  run->add_flag("--no-store", args->no_store, "do not record the run in the run store");
  run->add_flag("-q,--quiet", args->quiet, "no live progress line");
  run->add_flag("-v,--verbose", args->verbose, "echo the workers' output, prefixed by rank");
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
}

}  // namespace commtune::cli

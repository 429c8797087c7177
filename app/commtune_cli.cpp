// commtune-cli: the headless front end. `run` launches a job on this machine
// and reports it live; `summarize` turns event files from torchrun/srun jobs
// into the same report; `params` lists every configurable parameter.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/config/run_config.h"
#include "core/dist/devices.h"
#include "core/export/powersgd_export.h"
#include "core/launch/launcher.h"
#include "core/launch/run_report.h"
#include "core/version.h"

namespace {

std::atomic<bool> g_cancel{false};

void on_stop_signal(int) { g_cancel.store(true); }

constexpr int kExitFailed = 1;
constexpr int kExitConfig = 2;
constexpr int kExitCancelled = 130;

nlohmann::json load_raw_config(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json raw = nlohmann::json::object();
  if (!path.empty()) raw = commtune::RunConfig::from_file(path).to_json();
  for (const auto& o : overrides) commtune::apply_override(raw, o);
  return raw;
}

void print_conclusion(const nlohmann::json& s) {
  const auto status = s.value("status", "");
  std::string line = "commtune: " + status;
  if (s.contains("reason")) line += " (" + s["reason"].get<std::string>() + ")";
  char buffer[512];
  if (s.contains("steps")) {
    std::snprintf(buffer, sizeof buffer, ": %lld/%lld steps in %.1f s",
                  static_cast<long long>(s["steps"].value("completed", 0LL)),
                  static_cast<long long>(s["steps"].value("requested", 0LL)), s.value("wall_s", 0.0));
    line += buffer;
  }
  if (s.contains("loss") && s["loss"]["final"].is_number()) {
    std::snprintf(buffer, sizeof buffer, ", loss %.4f -> %.4f", s["loss"]["initial"].get<double>(),
                  s["loss"]["final"].get<double>());
    line += buffer;
  }
  if (s.contains("step_time_ms")) {
    std::snprintf(buffer, sizeof buffer, ", %.2f ms/step", s["step_time_ms"]["median"].get<double>());
    line += buffer;
  }
  if (s.contains("traffic")) {
    std::snprintf(buffer, sizeof buffer, ", %.3f MB/step on the wire",
                  s["traffic"]["wire_bytes_per_step"].get<double>() / 1e6);
    line += buffer;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

int run_command(const std::string& config_path, const std::vector<std::string>& overrides,
                const std::string& summary_path, const std::string& metrics_path, bool quiet, bool verbose) {
  commtune::RunConfig config;
  try {
    config = commtune::RunConfig::parse(load_raw_config(config_path, overrides));
  } catch (const commtune::ConfigError& e) {
    std::fprintf(stderr, "commtune: configuration error: %s\n", e.what());
    return kExitConfig;
  }
  commtune::LaunchOptions options;
  options.config = config.to_json();
  try {
    options.world_size = commtune::resolve_world_size(config.run.world_size, config.run.device);
  } catch (const commtune::ConfigError& e) {
    std::fprintf(stderr, "commtune: configuration error: %s\n", e.what());
    return kExitConfig;
  }
  options.worker_path = commtune::default_worker_path();
  options.echo_worker_output = verbose;
  if (config.run.cpu_affinity == "cores" && commtune::cuda_device_count() == 0)
    options.rank_cpus = commtune::split_cores(options.world_size);

  commtune::RunSummary summary(options.world_size);
  commtune::ProgressLine progress(options.world_size, config.run.steps);
  std::unique_ptr<commtune::MetricsFile> metrics;
  std::vector<commtune::EventSubscriber*> subscribers{&summary};
  if (!quiet) subscribers.push_back(&progress);
  if (!metrics_path.empty()) {
    metrics = std::make_unique<commtune::MetricsFile>(metrics_path);
    subscribers.push_back(metrics.get());
  }

  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGHUP, &action, nullptr);

  const auto outcome = commtune::launch(options, subscribers, &g_cancel);
  progress.finish();
  const auto result = summary.to_json(outcome, options.config);
  if (!summary_path.empty()) {
    std::ofstream out(summary_path);
    out << result.dump(2) << '\n';
    if (!out) std::fprintf(stderr, "commtune: cannot write %s\n", summary_path.c_str());
  } else {
    std::cout << result.dump(2) << std::endl;
  }
  print_conclusion(result);
  if (outcome.status == commtune::RunStatus::Failed) {
    for (const auto& r : outcome.ranks)
      if (outcome.failed_rank && r.rank == *outcome.failed_rank && r.error.empty())
        for (const auto& line : r.output_tail) std::fprintf(stderr, "  [rank %d] %s\n", r.rank, line.c_str());
  }
  for (const auto& r : outcome.ranks)
    if (outcome.failed_rank && r.rank == *outcome.failed_rank && r.error_kind == "config") return kExitConfig;
  switch (outcome.status) {
    case commtune::RunStatus::Succeeded:
      return 0;
    case commtune::RunStatus::Cancelled:
      return kExitCancelled;
    case commtune::RunStatus::Failed:
      return kExitFailed;
  }
  return kExitFailed;
}

// Rebuilds a run's summary from event files that workers wrote under
// torchrun or srun (COMMTUNE_EVENT_FILE=dir/events-{rank}.ctev).
int summarize_command(const std::vector<std::string>& files, const std::string& summary_path,
                      const std::string& metrics_path) {
  std::vector<commtune::events::Event> all;
  int world_size = 0;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    commtune::events::Decoder decoder;
    auto events = decoder.feed(bytes);
    if (events.empty()) throw std::runtime_error(file + " holds no events");
    world_size = std::max<int>(world_size,
                               static_cast<int>(std::get<commtune::events::Hello>(events.front().payload).world_size));
    for (auto& e : events) all.push_back(std::move(e));
  }
  commtune::RunSummary summary(world_size);
  std::unique_ptr<commtune::MetricsFile> metrics;
  if (!metrics_path.empty()) metrics = std::make_unique<commtune::MetricsFile>(metrics_path);
  commtune::RunOutcome outcome;
  outcome.ranks.resize(world_size);
  nlohmann::json config;
  for (const auto& e : all) {
    summary.on_event(e);
    if (metrics) metrics->on_event(e);
    auto& rank = outcome.ranks.at(e.rank);
    rank.rank = e.rank;
    if (const auto* hello = std::get_if<commtune::events::Hello>(&e.payload)) rank.pid = static_cast<int>(hello->pid);
    const auto kind = e.kind();
    if (kind == "run_start" && config.is_null()) config = e.message()->value("config", nlohmann::json::object());
    if (kind == "run_end") {
      rank.reported_end = true;
      rank.exit_code = 0;
      outcome.wall_s = std::max(outcome.wall_s, e.message()->value("wall_s", 0.0));
    }
    if (kind == "error") {
      rank.error_kind = e.message()->value("error_kind", "runtime");
      rank.error = e.message()->value("message", "");
    }
  }
  outcome.status = commtune::RunStatus::Succeeded;
  for (const auto& r : outcome.ranks) {
    if (r.reported_end) continue;
    outcome.status = commtune::RunStatus::Failed;
    const bool blame = !outcome.failed_rank || (!r.error.empty() && r.error_kind != "communication" &&
                                                outcome.ranks[*outcome.failed_rank].error_kind == "communication");
    if (blame) {
      outcome.failed_rank = r.rank;
      outcome.reason = "rank " + std::to_string(r.rank) +
                       " failed: " + (r.error.empty() ? std::string("its events end before the run does") : r.error);
    }
  }
  const auto result = summary.to_json(outcome, config);
  if (!summary_path.empty())
    std::ofstream(summary_path) << result.dump(2) << '\n';
  else
    std::cout << result.dump(2) << std::endl;
  print_conclusion(result);
  return outcome.status == commtune::RunStatus::Succeeded ? 0 : kExitFailed;
}

// `export powersgd`: from a run summary (a finished run) or a checkpoint folder.
int export_powersgd_command(const std::string& from, bool runtime_state, const std::string& out_dir) {
  namespace fs = std::filesystem;
  nlohmann::json config;
  std::string checkpoint;
  if (fs::is_directory(from)) {
    std::ifstream in(fs::path(from) / "config.json");
    if (!in) throw std::runtime_error(from + " has no config.json: not a commtune checkpoint folder");
    config = nlohmann::json::parse(in);
    checkpoint = from;
  } else {
    std::ifstream in(from);
    if (!in) throw std::runtime_error("cannot read " + from);
    const auto summary = nlohmann::json::parse(in);
    if (!summary.contains("config")) throw std::runtime_error(from + " is not a commtune run summary");
    config = summary["config"];
    if (runtime_state) {
      if (!summary.contains("checkpoints") || summary["checkpoints"].empty())
        throw std::runtime_error("the run wrote no checkpoint to take runtime state from: run it with checkpoint.dir set");
      checkpoint = summary["checkpoints"].back()["folder"];
    }
  }
  if (!runtime_state) checkpoint.clear();
  for (const auto& file : commtune::export_powersgd(config, checkpoint, out_dir)) std::printf("%s\n", file.c_str());
  return 0;
}

void print_param(const nlohmann::json& p, const std::string& prefix) {
  std::string line = "  " + prefix + p["name"].get<std::string>() + " (" + p["type"].get<std::string>() + ", default " +
                     p["default"].dump() + "): " + p["doc"].get<std::string>();
  line +=
      " [" + p["allowed"].get<std::string>() + (p.contains("unit") ? ", " + p["unit"].get<std::string>() : "") + "]";
  std::cout << line << "\n";
}

void print_markdown_param(const nlohmann::json& p, const std::string& prefix) {
  std::cout << "| `" << prefix << p["name"].get<std::string>() << "` | " << p["type"].get<std::string>() << " | `"
            << p["default"].dump() << "` | " << p["allowed"].get<std::string>()
            << (p.contains("unit") ? " (" + p["unit"].get<std::string>() + ")" : "") << " | "
            << p["doc"].get<std::string>() << " |\n";
}

int params_command(const std::string& only, bool as_json, bool as_markdown) {
  const auto schema = commtune::describe_schema();
  if (as_json) {
    std::cout << schema.dump(2) << "\n";
    return 0;
  }
  auto show = as_markdown ? print_markdown_param : print_param;
  const char* header = "| parameter | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  if (only.empty() || only == "run") {
    std::cout << (as_markdown ? "## Run (top level)\n\n" : "run (top level):\n") << (as_markdown ? header : "");
    for (const auto& p : schema["root"]) show(p, "");
    std::cout << "\n";
  }
  for (const auto& section : schema["sections"]) {
    const auto key = section["section"].get<std::string>();
    if (!only.empty() && only != key) continue;
    if (section.contains("entries")) {
      std::cout << (as_markdown ? "## " + key + "\n\n" : key + ":\n");
      std::cout << (as_markdown
                        ? "`" + key + ".name` selects one of the entries below (default `" +
                              section["default"].get<std::string>() + "`).\n\n"
                        : "  " + key + ".name: one of the entries below (default " + section["default"].dump() + ")\n");
      if (!section["common"].empty()) {
        std::cout << (as_markdown ? "Common to every " + key + ":\n\n" + header : "");
        for (const auto& p : section["common"]) show(p, key + ".");
        std::cout << (as_markdown ? "\n" : "");
      }
      for (const auto& e : section["entries"]) {
        std::cout << (as_markdown ? "### " + key + ".name = `" + e["name"].get<std::string>() + "`\n\n" +
                                        e["doc"].get<std::string>() + "\n\n"
                                  : "  [" + e["name"].get<std::string>() + "] " + e["doc"].get<std::string>() + "\n");
        if (as_markdown && !e["params"].empty()) std::cout << header;
        for (const auto& p : e["params"]) show(p, (as_markdown ? "" : "  ") + key + ".");
        if (as_markdown) std::cout << "\n";
      }
    } else {
      std::cout << (as_markdown ? "## " + key + "\n\n" + header : key + ":\n");
      for (const auto& p : section["params"]) show(p, key + ".");
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"commtune: tune and visualise how data-parallel training communicates gradients"};
  app.set_version_flag("--version", commtune::version_text());
  app.require_subcommand(1);

  auto* run = app.add_subcommand("run", "run one training job on this machine and report it live");
  std::string config_path, summary_path, metrics_path;
  std::vector<std::string> overrides;
  bool quiet = false, verbose = false;
  run->add_option("-c,--config", config_path, "run configuration (JSON); every key is optional")
      ->check(CLI::ExistingFile);
  run->add_option("-s,--set", overrides, "override a parameter: path=value, e.g. hook.name=fp16_compress (repeatable)");
  run->add_option("--summary", summary_path, "write the run summary (JSON) here instead of to stdout");
  run->add_option("--metrics", metrics_path, "write every rank's per-step metrics here (JSON Lines)");
  run->add_flag("-q,--quiet", quiet, "no live progress line");
  run->add_flag("-v,--verbose", verbose, "echo the workers' output, prefixed by rank");

  auto* params = app.add_subcommand("params", "list every parameter: type, default, allowed values, meaning");
  std::string section;
  bool as_json = false, as_markdown = false;
  params->add_option("section", section, "only this section (run, model, data, optimizer, hook, ddp, weights, debug)");
  params->add_flag("--json", as_json, "machine-readable");
  params->add_flag("--markdown", as_markdown, "as Markdown tables (docs/config.md)");

  auto* summarize = app.add_subcommand(
      "summarize", "summarize a run from the event files its workers wrote (COMMTUNE_EVENT_FILE, e.g. under torchrun)");
  std::vector<std::string> event_files;
  summarize->add_option("files", event_files, "event files, one per rank")->required()->check(CLI::ExistingFile);
  summarize->add_option("--summary", summary_path, "write the summary (JSON) here instead of to stdout");
  summarize->add_option("--metrics", metrics_path, "write every rank's per-step metrics here (JSON Lines)");

  auto* export_cmd = app.add_subcommand("export", "export a tuned configuration for a production PyTorch job");
  export_cmd->require_subcommand(1);
  auto* export_powersgd = export_cmd->add_subcommand(
      "powersgd", "a PowerSGDState file (torch.load(..., weights_only=True)), the configuration and a Python snippet");
  std::string export_from, export_out;
  bool runtime_state = false;
  export_powersgd->add_option("--from", export_from, "a run summary (JSON) or a checkpoint folder (step-NNNNNN)")
      ->required()
      ->check(CLI::ExistingPath);
  export_powersgd->add_option("--out", export_out, "folder to write into")->required();
  export_powersgd->add_flag("--runtime-state", runtime_state,
                            "also each rank's runtime state (iteration, random generator, error and P/Q memories) "
                            "from the checkpoint, so the job continues where the run stopped");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*export_powersgd) return export_powersgd_command(export_from, runtime_state, export_out);
    if (*run) return run_command(config_path, overrides, summary_path, metrics_path, quiet, verbose);
    if (*summarize) return summarize_command(event_files, summary_path, metrics_path);
    if (*params) return params_command(section, as_json, as_markdown);
  } catch (const commtune::ConfigError& e) {
    std::fprintf(stderr, "commtune: configuration error: %s\n", e.what());
    return kExitConfig;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commtune: %s\n", e.what());
    return kExitFailed;
  }
  return 0;
}

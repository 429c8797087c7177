// `export`: runs and their metrics as CSV or JSON for analysis elsewhere, a
// tuned configuration for a production PyTorch job (`production` for any
// hook, `powersgd` for PowerSGD's state file), and scripts that launch a
// configuration on several nodes (`launch`).
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <set>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/export/export_files.h"
#include "core/tuner/export/launch_scripts.h"
#include "core/tuner/export/powersgd_export.h"
#include "core/tuner/export/production_export.h"
#include "core/tuner/export/run_source.h"
#include "core/tuner/io/input_file.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/store/run_query.h"

namespace commtune::cli {
namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// A CSV field for `v`; escaped through printable() when it goes to a
// terminal (names and reasons come from a shared store), as written when it
// goes to a file or a pipe.
std::string csv_value(const nlohmann::json& v, bool to_terminal) {
  if (v.is_null()) return "";
  const auto text = v.is_string() ? v.get<std::string>() : json_text(v);
  return csv_field(to_terminal ? printable(text) : text);
}

void write_csv_row(std::ostream& out, const std::vector<std::string>& fields) {
  for (std::size_t i = 0; i < fields.size(); ++i) out << (i ? "," : "") << fields[i];
  out << "\n";
}

nlohmann::json step_json(const db::StepRow& s) {
  return {{"run_id", s.run_id},
          {"rank", s.rank},
          {"step", s.step},
          {"wall_s", s.wall_s},
          {"loss", s.loss},
          {"lr", s.lr},
          {"t_data", s.t_data},
          {"t_forward", s.t_forward},
          {"t_backward", s.t_backward},
          {"t_comm_wait", s.t_comm_wait},
          {"t_hook", s.t_hook},
          {"t_optimizer", s.t_optimizer},
          {"t_step", s.t_step},
          {"wire_bytes", s.wire_bytes},
          {"uncompressed_bytes", s.uncompressed_bytes}};
}

struct ExportRunsArgs {
  std::vector<std::int64_t> runs;
  std::optional<std::int64_t> sweep;
  std::string format = "csv", out;
  bool metrics = false;
};

// The runs to `out`; whether it took every byte.
bool write_runs(const ExportRunsArgs& args, const db::Store& store, const std::vector<std::int64_t>& ids,
                std::ostream& out, bool to_terminal) {
  if (args.metrics) {
    bool header = true;
    auto all = nlohmann::json::array();
    for (const auto id : ids)
      for (const auto& s : store.steps(id)) {
        auto row = step_json(s);
        if (args.format == "json") {
          all.push_back(std::move(row));
          continue;
        }
        if (header) {
          std::vector<std::string> names;
          for (const auto& [k, v] : row.items()) names.push_back(k);
          write_csv_row(out, names);
          header = false;
        }
        std::vector<std::string> fields;
        for (const auto& [k, v] : row.items()) fields.push_back(csv_value(v, to_terminal));
        write_csv_row(out, fields);
      }
    if (args.format == "json") out << json_text(all, 1) << "\n";
    return static_cast<bool>(out);
  }

  std::vector<nlohmann::json> rows;
  std::set<std::string> param_names;
  for (const auto id : ids) {
    const auto run = store.run(id);
    auto row = run_json(*run, false);
    row["digest"] = digest_json(digest_run(store, *run));
    row["params"] = nlohmann::json::object();
    for (const auto& [name, value] : run_params(*run)) {
      row["params"][name] = value;
      param_names.insert(name);
    }
    rows.push_back(std::move(row));
  }
  if (args.format == "json") {
    out << json_text(nlohmann::json(rows), 2) << "\n";
    return static_cast<bool>(out);
  }
  const std::vector<std::string> run_columns{
      "id",         "sweep_id",        "trial",           "name",   "status",    "hook",
      "world_size", "steps_requested", "steps_completed", "wall_s", "final_loss"};
  const std::vector<std::string> digest_columns{"tail_loss", "step_ms", "wire_mb_per_step", "compression_ratio"};
  std::vector<std::string> header = run_columns;
  header.insert(header.end(), digest_columns.begin(), digest_columns.end());
  header.insert(header.end(), param_names.begin(), param_names.end());
  write_csv_row(out, header);
  for (const auto& row : rows) {
    std::vector<std::string> fields;
    for (const auto& c : run_columns) fields.push_back(csv_value(row[c], to_terminal));
    for (const auto& c : digest_columns) fields.push_back(csv_value(row["digest"][c], to_terminal));
    for (const auto& p : param_names)
      fields.push_back(csv_value(row["params"].value(p, nlohmann::json(nullptr)), to_terminal));
    write_csv_row(out, fields);
  }
  return static_cast<bool>(out);
}

// Runs: one row each with their numbers and every parameter. With
// --metrics: one row per run, rank and step instead. A file (-o) is written
// whole or not at all (OutputFile).
int export_runs_command(const ExportRunsArgs& args, const Context& context) {
  const auto store = open_store(context.db);
  const auto ids = select_runs(*store, args.runs, args.sweep);
  if (args.out.empty()) return write_runs(args, *store, ids, std::cout, ::isatty(STDOUT_FILENO)) ? kExitOk : kExitFailed;
  OutputFile file(args.out);
  write_runs(args, *store, ids, file.stream(), false);
  file.commit();  // says why it could not (a full disk), the previous file kept
  return kExitOk;
}

struct ExportConfigArgs {
  std::string from, out;
  std::optional<std::int64_t> run;
  bool runtime_state = false;
};

// The configuration to export and the checkpoint to take runtime state from:
// from a stored run, a run summary file or a checkpoint folder. Each is
// outside input: the configuration is read by the schema (as `--set` values
// are) before anything is generated from it, and its errors name the source.
std::pair<nlohmann::json, std::string> export_source(const ExportConfigArgs& args, const Context& context) {
  namespace fs = std::filesystem;
  if (args.run.has_value() == !args.from.empty())
    throw std::invalid_argument("name what to export: either --run ID or --from FILE_OR_FOLDER");
  nlohmann::json config;
  std::string checkpoint, source;
  if (args.run) {
    const auto store = open_store(context.db);
    auto stored = run_export_source(*store, *args.run);
    config = std::move(stored.config);
    checkpoint = std::move(stored.checkpoint);
    source = "run " + std::to_string(*args.run);
  } else if (fs::is_directory(args.from)) {
    source = (fs::path(args.from) / "config.json").string();
    if (!fs::exists(source)) throw std::runtime_error(args.from + " has no config.json: not a commtune checkpoint folder");
    config = read_json_file(source);
    checkpoint = args.from;
  } else {
    source = args.from;
    const auto summary = read_json_file(source);
    if (!summary.is_object() || !summary.contains("config"))
      throw std::runtime_error(source + " is not a commtune run summary (no \"config\")");
    config = summary["config"];
    const auto checkpoints = summary.value("checkpoints", nlohmann::json::array());
    if (!checkpoints.is_array())
      throw std::runtime_error(source + ": \"checkpoints\" is " + std::string(checkpoints.type_name()) +
                               ", not the list of checkpoint folders a run summary holds");
    if (!checkpoints.empty()) {
      const auto& last = checkpoints.back();
      if (!last.is_object() || !last.contains("folder") || !last["folder"].is_string())
        throw std::runtime_error(source + ": checkpoints[-1].folder is not a folder name");
      checkpoint = last["folder"].get<std::string>();
    }
  }
  try {
    config = validated_config(config);
  } catch (const ConfigError& e) {
    throw ConfigError(e.field(), e.problem() + " (in the configuration of " + source + ")");
  }
  // A checkpoint folder is named for its runtime state: --from FOLDER implies --runtime-state.
  if (!args.runtime_state && !(args.from.size() && fs::is_directory(args.from))) return {config, ""};
  if (checkpoint.empty())
    throw std::runtime_error("the run left no checkpoint to take runtime state from: run it with checkpoint.dir set");
  return {config, checkpoint};
}

int export_config_command(const ExportConfigArgs& args, const Context& context, bool powersgd_only) {
  const auto [config, checkpoint] = export_source(args, context);
  const auto files = powersgd_only ? export_powersgd(config, checkpoint, args.out)
                                   : export_for_production(config, checkpoint, args.out);
  for (const auto& file : files) std::printf("%s\n", file.c_str());
  if (args.run) {
    const auto writer = open_writer(context.db);
    const auto run_id = *args.run;
    writer->call([run_id, files](db::Store& s) {
      for (const auto& f : files) s.add_artifact(run_id, "export", std::filesystem::absolute(f).string());
    });
    writer->flush();
  }
  return kExitOk;
}

void add_export_config_options(CLI::App& command, ExportConfigArgs& args) {
  command.add_option("--run", args.run, "a stored run");
  command.add_option("--from", args.from, "or a run summary (JSON) or a checkpoint folder (step-NNNNNN)")
      ->check(CLI::ExistingPath);
  command.add_option("--out", args.out, "folder to write into")->required();
  command.add_flag("--runtime-state", args.runtime_state,
                   "also each rank's runtime state (iteration, random generator, error and P/Q memories) from the "
                   "run's last checkpoint, so the job continues where the run stopped (implied by --from a "
                   "checkpoint folder)");
}

struct ExportLaunchArgs {
  ExportConfigArgs source;
  std::vector<std::string> overrides;
  LaunchPlan plan;
};

int export_launch_command(const ExportLaunchArgs& args, const Context& context) {
  auto config = export_source(args.source, context).first;
  for (const auto& o : args.overrides) apply_override(config, o);
  auto plan = args.plan;
  if (args.source.run && plan.name == LaunchPlan{}.name) plan.name = "commtune-run-" + std::to_string(*args.source.run);
  for (const auto& file : write_launch_scripts(config, plan, args.source.out)) std::printf("%s\n", file.c_str());
  std::printf("start: sh %s/launch_torchrun.sh on each node, or sbatch %s/launch.sbatch\n"
              "follow: commtune-cli import --follow %s/events\n",
              args.source.out.c_str(), args.source.out.c_str(), args.source.out.c_str());
  return kExitOk;
}

}  // namespace

void add_export_commands(CLI::App& app, Context& context) {
  auto* export_cmd = app.add_subcommand("export", "export runs and metrics, or a tuned configuration for production");
  export_cmd->require_subcommand(1);

  auto runs_args = std::make_shared<ExportRunsArgs>();
  auto* runs = export_cmd->add_subcommand("runs", "stored runs (or their per-step metrics) as CSV or JSON");
  runs->add_option("runs", runs_args->runs, "run ids (default: all, or the sweep's)");
  runs->add_option("--sweep", runs_args->sweep, "the trials of this sweep");
  runs->add_option("--format", runs_args->format, "csv or json")->check(CLI::IsMember({"csv", "json"}));
  runs->add_flag("--metrics", runs_args->metrics, "one row per run, rank and step instead of one per run");
  runs->add_option("-o,--out", runs_args->out, "write here instead of to stdout");
  runs->callback([runs_args, &context] { context.exit_code = export_runs_command(*runs_args, context); });

  auto production_args = std::make_shared<ExportConfigArgs>();
  auto* production = export_cmd->add_subcommand(
      "production",
      "a run's configuration for a production PyTorch job: the hook's state file if it has one, the "
      "configuration (JSON) and a Python file that registers the hook");
  add_export_config_options(*production, *production_args);
  production->callback(
      [production_args, &context] { context.exit_code = export_config_command(*production_args, context, false); });

  auto powersgd_args = std::make_shared<ExportConfigArgs>();
  auto* powersgd = export_cmd->add_subcommand(
      "powersgd", "a PowerSGDState file (torch.load(..., weights_only=True)), the configuration and a Python snippet");
  add_export_config_options(*powersgd, *powersgd_args);
  powersgd->callback(
      [powersgd_args, &context] { context.exit_code = export_config_command(*powersgd_args, context, true); });

  auto launch_args = std::make_shared<ExportLaunchArgs>();
  auto* launch = export_cmd->add_subcommand(
      "launch", "scripts that start a run's configuration on several nodes: torchrun on each node, or SLURM's sbatch");
  launch->add_option("--run", launch_args->source.run, "a stored run");
  launch->add_option("--from", launch_args->source.from, "or a run summary (JSON) or a checkpoint folder")
      ->check(CLI::ExistingPath);
  launch->add_option("--out", launch_args->source.out, "folder to write into")->required();
  launch->add_option("-s,--set", launch_args->overrides, "change a parameter for the job: path=value (repeatable)");
  launch->add_option("--nodes", launch_args->plan.nodes, "nodes (default 2)");
  launch->add_option("--ranks-per-node", launch_args->plan.ranks_per_node, "ranks per node, one per GPU (default 1)");
  launch->add_option("--rendezvous", launch_args->plan.rendezvous,
                     "torchrun's rendezvous HOST:PORT, a node every node reaches (default node0:29400)");
  launch->add_option("--name", launch_args->plan.name, "the job's name");
  launch->callback([launch_args, &context] { context.exit_code = export_launch_command(*launch_args, context); });
}

}  // namespace commtune::cli

// `sweep`: plan a sweep from a spec file or from flags, store it, and run its
// trials; `sweep --resume ID` continues one whose process died or was
// stopped. Ends with the comparison of its trials.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/io/input_file.h"
#include "core/tuner/store/stop_requests.h"
#include "core/tuner/sweep/sweep_runner.h"

namespace commtune::cli {
namespace {

struct SweepArgs {
  std::string spec_path, config_path, name, strategy, objective, work_dir, early_stop, backend;
  std::vector<std::string> overrides, axes;
  ScriptArgs script;
  std::optional<std::int64_t> trials, seed, seeds, parallel, checkpoint_every, resume, max_trials;
  bool no_baseline = false, plan_only = false, verbose = false, allow_inactive_hooks = false;
};

// "MIN..MAX[:POINTS][:log]": a range, as a spec's {"min", "max", "points", "log"}.
nlohmann::json axis_range(const std::string& param, const std::string& text) {
  const auto field = "--axis " + param;
  const auto dots = text.find("..");
  std::vector<std::string> parts;
  for (std::size_t start = dots + 2; start <= text.size();) {
    const auto colon = std::min(text.find(':', start), text.size());
    parts.push_back(text.substr(start, colon - start));
    start = colon + 1;
  }
  const auto number = [&](const std::string& token) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(token, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used == 0 || used != token.size() || !std::isfinite(v))
      throw ConfigError(field, "a range reads MIN..MAX[:POINTS][:log] (e.g. 0.02..0.2:4:log), got '" + text + "'");
    return v;
  };
  nlohmann::json range{{"min", number(text.substr(0, dots))}, {"max", number(parts.at(0))}};
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "log")
      range["log"] = true;
    else if (!range.contains("points") && !parts[i].empty() &&
             parts[i].find_first_not_of("0123456789") == std::string::npos && parts[i].size() < 7)
      range["points"] = std::stoll(parts[i]);
    else
      throw ConfigError(field, "a range reads MIN..MAX[:POINTS][:log] (e.g. 0.02..0.2:4:log), got '" + text + "'");
  }
  return range;
}

// "a,b,c": each value as JSON when it parses (numbers, true), else as text.
nlohmann::json axis_values(const std::string& list) {
  auto values = nlohmann::json::array();
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = std::min(list.find(',', start), list.size());
    const auto token = list.substr(start, comma - start);
    const auto parsed = nlohmann::json::parse(token, nullptr, false);
    values.push_back(parsed.is_discarded() || parsed.is_object() || parsed.is_array() ? nlohmann::json(token) : parsed);
    start = comma + 1;
  }
  return values;
}

// The spec file's JSON with the command line's additions.
nlohmann::json spec_json(const SweepArgs& args) {
  nlohmann::json spec = nlohmann::json::object();
  if (!args.spec_path.empty()) {
    spec = read_json_file(args.spec_path);
    if (!spec.is_object()) throw ConfigError(args.spec_path, "is not a JSON object (a sweep spec)");
  }
  if (!args.config_path.empty() || !args.overrides.empty() || !args.script.path.empty()) {
    auto base = load_raw_config(args.config_path, {});
    if (spec.contains("base")) base.merge_patch(spec["base"]);
    if (spec.contains("script") && !args.script.path.empty())
      throw ConfigError("--script", "names a script, and so does the spec's script section: give one");
    apply_script_args(base, args.script);
    for (const auto& o : args.overrides) apply_override(base, o);
    spec["base"] = base;
  } else {
    apply_script_args(spec, args.script);  // refuses script options without --script
  }
  if (!args.axes.empty()) {
    if (!spec.contains("axes")) spec["axes"] = nlohmann::json::object();
    if (!spec["axes"].is_object()) throw ConfigError("axes", "--axis needs the spec's axes to be an object");
    for (const auto& a : args.axes) {
      const auto eq = a.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == a.size())
        throw ConfigError("--axis",
                          "wants PARAM=V1,V2,... (e.g. hook.matrix_approximation_rank=1,2,4), got '" + a + "'");
      const auto param = a.substr(0, eq), values = a.substr(eq + 1);
      spec["axes"][param] = values.find("..") != std::string::npos ? axis_range(param, values) : axis_values(values);
    }
  }
  if (!args.name.empty()) spec["name"] = args.name;
  if (!args.strategy.empty()) spec["strategy"] = args.strategy;
  if (!args.backend.empty()) spec["backend"] = args.backend;
  if (!args.objective.empty()) spec["objective"] = args.objective;
  if (args.trials) spec["trials"] = *args.trials;
  if (args.max_trials) spec["max_trials"] = *args.max_trials;
  if (args.seed) spec["seed"] = *args.seed;
  if (args.parallel) spec["parallel"] = *args.parallel;
  if (args.checkpoint_every) spec["checkpoint_every"] = *args.checkpoint_every;
  if (args.no_baseline) spec["baseline"] = false;
  if (args.seeds) spec["seeds"] = *args.seeds;
  if (args.allow_inactive_hooks) spec["allow_inactive_hooks"] = true;
  if (!args.early_stop.empty()) {
    const auto colon = args.early_stop.find(':');
    try {
      spec["early_stopping"]["min_steps"] = std::stoll(args.early_stop.substr(0, colon));
      if (colon != std::string::npos)
        spec["early_stopping"]["reduction_factor"] = std::stod(args.early_stop.substr(colon + 1));
    } catch (const std::logic_error&) {
      throw ConfigError("--early-stop", "wants MIN_STEPS[:FACTOR] (e.g. 20:3), got '" + args.early_stop + "'");
    }
  }
  return spec;
}

// The plan as it streams: trial and steps padded to fixed widths and the
// label last, so that 10^6 trials print in one trial's memory.
void print_plan(const SweepSpec& spec) {
  std::int64_t most_steps = spec.base.value("steps", RunConfig{}.run.steps);
  for (const auto& axis : spec.axes)
    if (axis.param == "steps") {
      for (const auto& v : axis.values)
        if (v.is_number_integer()) most_steps = std::max(most_steps, v.get<std::int64_t>());
      if (axis.max) most_steps = std::max(most_steps, static_cast<std::int64_t>(*axis.max));
    }
  const int trial_width = static_cast<int>(std::max<std::size_t>(5, std::to_string(count_trials(spec) * 2).size()));
  const int steps_width = static_cast<int>(std::max<std::size_t>(5, std::to_string(most_steps).size()));
  std::printf("%-*s  %*s  %s\n", trial_width, "trial", steps_width, "steps", "label");
  for_each_trial(spec, [&](const PlannedTrial& t) {
    std::printf("%-*lld  %*lld  %s\n", trial_width, static_cast<long long>(db::trial_number(t.index)), steps_width,
                static_cast<long long>(t.config.run.steps), printable(t.label).c_str());
  });
  std::fflush(stdout);
  if (spec.early_stopping.enabled()) {
    std::cout << "successive halving: rungs at";
    for (const auto r : spec.early_stopping.rungs(spec.base.value("steps", RunConfig{}.run.steps)))
      std::cout << " " << r;
    std::cout << " steps, the best 1/" << spec.early_stopping.reduction_factor << " go on at each\n";
  }
}

void print_trial(const TrialEvent& e) {
  std::string line = "[trial " + std::to_string(db::trial_number(e.trial)) + "/" + std::to_string(e.trials) + ", run " +
                     std::to_string(e.run_id) + "] " + e.label + ": ";
  if (!e.finished) {
    line += (e.from_step > 0 ? "continues from step " + std::to_string(e.from_step) : std::string("starts")) +
            " to step " + std::to_string(e.to_step);
  } else {
    line += e.status;
    if (e.digest.loss) line += ", tail loss " + format("%.5f", *e.digest.loss);
    if (e.digest.step_ms) line += ", " + format("%.2f", *e.digest.step_ms) + " ms/step";
    if ((e.status == db::status::kFailed || e.status == db::status::kDiverged) && e.summary.contains("reason"))
      line += " (" + e.summary["reason"].get<std::string>() + ")";
  }
  std::fprintf(stderr, "%s\n", printable(line).c_str());
}

int sweep_command(const SweepArgs& args, const Context& context) {
  std::unique_ptr<db::Writer> writer;
  watch_stop_signals();  // from here a signal stops the sweep, even one before its first trial
  std::int64_t sweep_id = 0;
  if (args.resume) {
    if (!args.spec_path.empty() || !args.axes.empty() || !args.overrides.empty() || !args.config_path.empty())
      throw std::invalid_argument("--resume continues a stored sweep as planned: give no spec, axes or --set with it");
    if (!args.script.path.empty()) throw std::invalid_argument("--resume continues a stored sweep as planned: give no --script with it");
    writer = open_writer(context.db);
    sweep_id = *args.resume;
  } else {
    const auto spec = SweepSpec::parse_new(spec_json(args));
    if (args.plan_only) {
      print_plan(spec);
      return kExitOk;
    }
    writer = open_writer(context.db);
    std::int64_t trials = 0;
    sweep_id = create_sweep(spec, *writer, &trials);
    std::fprintf(stderr, "commtune: sweep %lld with %lld trials in %s\n", static_cast<long long>(sweep_id),
                 static_cast<long long>(trials), writer->path().c_str());
  }

  SweepRunOptions options;
  options.store = writer.get();
  options.work_dir =
      args.work_dir.empty() ? (std::filesystem::path(writer->path()).parent_path() / "sweeps").string() : args.work_dir;
  options.cancel = &g_stop;
  options.echo_worker_output = args.verbose;
  // A trial stops on its own when another process (the desktop app) asks:
  // the sweep goes on with the next one. Ctrl-C stops every trial and the sweep.
  StopRequestWatcher stop_requests(writer->path(), &g_stop);
  // Stop all in the desktop app asks for the whole sweep: as Ctrl-C here (cancelled, resumable).
  stop_requests.watch_sweep(sweep_id, &g_stop);
  std::mutex flags_mutex;
  std::map<std::int64_t, std::unique_ptr<std::atomic<bool>>> trial_flags;
  options.trial_cancel = [&](const TrialEvent& e) -> const std::atomic<bool>* {
    std::lock_guard lock(flags_mutex);
    auto& flag = trial_flags[e.run_id];
    if (!flag) flag = std::make_unique<std::atomic<bool>>(false);
    stop_requests.watch(e.run_id, flag.get());
    return flag.get();
  };
  options.on_trial = [&stop_requests](const TrialEvent& e) {
    if (e.finished) stop_requests.forget(e.run_id);
    print_trial(e);
  };
  const auto outcome = run_sweep(sweep_id, options);

  std::string tally;
  for (const auto& [status, count] : outcome.trial_statuses) tally += " " + std::to_string(count) + " " + status;
  std::fprintf(stderr, "commtune: sweep %lld %s:%s\n", static_cast<long long>(sweep_id), outcome.status.c_str(),
               tally.c_str());
  if (outcome.status == db::status::kCancelled) {
    std::fprintf(stderr, "commtune: continue it with: commtune-cli sweep --resume %lld\n",
                 static_cast<long long>(sweep_id));
    return cancelled_exit_code();
  }
  CompareArgs compare;
  compare.sweep = sweep_id;
  compare_command(compare, context);
  const int ended_well =
      outcome.trial_statuses.count(db::status::kSucceeded) ? outcome.trial_statuses.at(db::status::kSucceeded) : 0;
  return ended_well > 0 ? kExitOk : kExitFailed;
}

}  // namespace

void add_sweep_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<SweepArgs>();
  auto* sweep = app.add_subcommand("sweep", "plan, run and store a hyperparameter sweep (docs/sweeps.md)");
  sweep->add_option("--spec", args->spec_path, "sweep spec (JSON): base, axes, strategy, early_stopping, ...")
      ->check(CLI::ExistingFile);
  sweep->add_option("-c,--config", args->config_path, "base run configuration (JSON)")->check(CLI::ExistingFile);
  sweep->add_option("-s,--set", args->overrides, "override a base parameter: path=value (repeatable)")
      ->allow_extra_args(false);
  add_on_nonfinite_option(*sweep, args->overrides);
  sweep->add_option("-a,--axis", args->axes,
                    "an axis: PARAM=V1,V2,... (hook.matrix_approximation_rank=1,2,4) or a range PARAM=MIN..MAX[:POINTS][:log] "
                    "(optimizer.lr=0.02..0.2:4:log; random search and TPE draw from it without POINTS) (repeatable)")
      ->allow_extra_args(false);
  sweep->add_option("-n,--name", args->name, "the sweep's name");
  sweep->add_option("--strategy", args->strategy,
                    "grid (every combination), random, or tpe (each trial drawn from a model of those finished)")
      ->check(CLI::IsMember({"grid", "random", "tpe"}));
  sweep->add_option("--objective", args->objective,
                    "what TPE minimises: tail_loss, step_time, or tail_loss,step_time (both: multi-objective)")
      ->check(CLI::IsMember({"tail_loss", "step_time", "tail_loss,step_time"}));
  sweep->add_option("--trials", args->trials, "random search and TPE: how many trials");
  sweep->add_option("--max-trials", args->max_trials,
                    "refuse sweeps of more trials than this (default 1000), counted before planning");
  sweep->add_option("--seed", args->seed, "random search and TPE: the seed of their draws");
  sweep->add_option("--parallel", args->parallel,
                    "trials at once, on disjoint cores or GPUs (backend slurm: jobs submitted at once)");
  sweep->add_option("--backend", args->backend,
                    "where trials run: local, or slurm (each trial a SLURM job, as the spec's slurm section says; "
                    "docs/cluster.md)")
      ->check(CLI::IsMember({"local", "slurm"}));
  sweep->add_option("--early-stop", args->early_stop,
                    "successive halving: MIN_STEPS[:FACTOR], rungs at MIN_STEPS x FACTOR^k (default factor 3)");
  sweep->add_option("--checkpoint-every", args->checkpoint_every,
                    "checkpoint trials this often (steps), so an interrupted trial resumes near where it stopped");
  sweep->add_flag("--no-baseline", args->no_baseline,
                  "no allreduce baseline trials (by default one at each value of the axes outside the hook)");
  sweep->add_option("--seeds", args->seeds,
                    "run every trial with this many seeds (seed, seed+1, ...): means and spreads, losses judged "
                    "against the spread");
  sweep->add_flag("--allow-inactive-hooks", args->allow_inactive_hooks,
                  "plan trials whose hook would never act within their steps (refused by default)");
  sweep->add_option("--work-dir", args->work_dir, "where trials keep checkpoints (default: sweeps/ beside the store)");
  sweep->add_option("--resume", args->resume, "continue this stored sweep where it stopped");
  sweep->add_flag("--plan", args->plan_only, "print the trials the sweep would run, and run nothing");
  sweep->add_flag("-v,--verbose", args->verbose, "echo the workers' output");
  add_script_options(*sweep, args->script);
  sweep->callback([args, &context] { context.exit_code = sweep_command(*args, context); });
}

}  // namespace commtune::cli

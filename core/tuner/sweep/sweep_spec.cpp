#include "core/tuner/sweep/sweep_spec.h"

#include "core/tuner/config/engine_check.h"
#include "core/tuner/config/hook_activity.h"
#include "core/tuner/netmodel/network.h"
#include "core/tuner/sweep/draw.h"

#include <limits>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <string_view>
#include <unordered_set>

namespace commtune {

Schema<SweepOptions> SweepOptions::schema() {
  return Schema<SweepOptions>()
      .text("name", &SweepOptions::name, "a name to find the sweep by")
      .choice("strategy", &SweepOptions::strategy, {"grid", "random", "tpe"},
              "grid: every combination of the axes' values; random: `trials` draws from them; tpe: `trials` "
              "draws, each from a model of the trials finished before it (tree-structured Parzen estimator)")
      .integer("trials", &SweepOptions::trials, {1, 100000}, "trials", "how many trials random search or TPE draws")
      .integer("seed", &SweepOptions::seed, {0, static_cast<double>(kMaxSeed)}, "", "seed of random search and TPE")
      .choice("objective", &SweepOptions::objective, {"tail_loss", "step_time", "tail_loss,step_time"},
              "what TPE minimises: the tail loss, the median step time, or both (multi-objective TPE)")
      .text("objective_network", &SweepOptions::objective_network,
            "TPE's step_time objective: \"\" for the median measured here, or a network preset (100mbit, 1gbit, "
            "10gbit, 25gbit, 100gbit, nvlink) to minimise the step time predicted there, one rank per node")
      .integer("tpe_startup_trials", &SweepOptions::tpe_startup_trials, {0, 100000}, "trials",
               "TPE: trials drawn uniformly before the model is used")
      .integer("tpe_candidates", &SweepOptions::tpe_candidates, {1, 10000}, "",
               "TPE: candidates drawn from the good trials' density per parameter")
      .flag("baseline", &SweepOptions::baseline,
            "also run the allreduce hook at every combination of the values the axes outside the hook take (and "
            "every seed): each trial is compared with the one at its own learning rate, batch, ...")
      .integer("seeds", &SweepOptions::seeds, {1, 1000}, "runs",
               "run every trial (and baseline) this many times, with seeds seed, seed+1, ...: tables show the mean "
               "and spread, and a loss is judged against the spread")
      .flag("allow_inactive_hooks", &SweepOptions::allow_inactive_hooks,
            "plan trials whose hook would never change what goes on the wire within their steps (refused by "
            "default: they would compare allreduce with allreduce)")
      .integer("parallel", &SweepOptions::parallel, {1, 1024}, "trials",
               "trials at once, each on its own share of the cores (CPU) or its own GPUs")
      .integer("checkpoint_every", &SweepOptions::checkpoint_every, Range::at_least(0), "steps",
               "checkpoint trials this often, so a resumed sweep continues an interrupted trial from there (0: only "
               "at the end of each segment)")
      .choice("backend", &SweepOptions::backend, {"local", "slurm"},
              "where trials run: local (on this machine, `parallel` at once) or slurm (each trial a SLURM job "
              "as the `slurm` section says, `parallel` jobs submitted at once; see docs/cluster.md)")
      .integer("max_trials", &SweepOptions::max_trials, {1, 1000000}, "trials",
               "refuse a sweep of more trials than this (counted before any is planned): a grid grows as the "
               "product of its axes");
}

Schema<EarlyStoppingOptions> EarlyStoppingOptions::schema() {
  return Schema<EarlyStoppingOptions>()
      .integer("min_steps", &EarlyStoppingOptions::min_steps, Range::at_least(0), "steps",
               "steps every trial runs before the first comparison (0: no early stopping)")
      .real("reduction_factor", &EarlyStoppingOptions::reduction_factor, Range::above(1), "",
            "at each rung, the best 1/reduction_factor of the trials go on")
      .choice("metric", &EarlyStoppingOptions::metric, {"tail_loss", "step_time"},
              "what trials are ranked by at a rung, lower is better: tail_loss (mean loss of the last 10% of steps) "
              "or step_time (median step time since the previous rung)");
}

Schema<SlurmOptions> SlurmOptions::schema() {
  const auto slurm_word = [](const char* field) {
    return [field](const std::string& v) {
      if (v.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-:,.") !=
          std::string::npos)
        throw ConfigError(std::string("slurm.") + field, "takes letters, digits and _-:,. only, got '" + v + "'");
    };
  };
  return Schema<SlurmOptions>()
      .text_checked("partition", &SlurmOptions::partition, slurm_word("partition"),
                    "the partition the jobs go to (\"\": the cluster's default)")
      .text_checked("time_limit", &SlurmOptions::time_limit, slurm_word("time_limit"),
                    "each job's time limit in SLURM's forms (minutes, HH:MM:SS, D-HH:MM:SS; \"\": the partition's)")
      .integer("nodes", &SlurmOptions::nodes, {1, 65536}, "nodes", "nodes per trial")
      .integer("ranks_per_node", &SlurmOptions::ranks_per_node, {1, 1024}, "ranks",
               "ranks per node (one per GPU on GPU nodes); a trial has nodes x ranks_per_node ranks")
      .integer("gpus_per_node", &SlurmOptions::gpus_per_node, {0, 1024}, "GPUs", "GPUs each job asks for per node")
      .flag("requeue", &SlurmOptions::requeue,
            "let SLURM requeue a job it preempts or whose node fails (the trial starts its segment over); without "
            "it such a trial fails with SLURM's reason")
      // The folder goes into the job script's #SBATCH --output line, which ends at a blank.
      .text_checked("folder", &SlurmOptions::folder,
                    [](const std::string& v) {
                      if (std::any_of(v.begin(), v.end(), [](unsigned char c) { return std::isspace(c) || c < 32; }))
                        throw ConfigError("slurm.folder", "must be a path without blanks or control characters, got '" +
                                                              v + "'");
                    },
            "a folder this machine and every node see (scripts, checkpoints and event files go there; \"\": the "
            "sweep's work folder)")
      .text("worker", &SlurmOptions::worker,
            "commtune-worker as the nodes see it (\"\": the one beside this program)")
      .real("quiet_limit_s", &SlurmOptions::quiet_limit_s, {1, 1e7}, "s",
            "a running job whose ranks write no event for this long is cancelled and its trial fails")
      .real("poll_s", &SlurmOptions::poll_s, {0.05, 3600}, "s", "how often SLURM is asked about each job");
}

std::vector<std::int64_t> EarlyStoppingOptions::rungs(std::int64_t max_steps) const {
  std::vector<std::int64_t> out;
  if (enabled())
    for (double r = static_cast<double>(min_steps); r < static_cast<double>(max_steps); r *= reduction_factor)
      if (out.empty() || static_cast<std::int64_t>(r) > out.back()) out.push_back(static_cast<std::int64_t>(r));
  out.push_back(max_steps);
  return out;
}

namespace {

const std::vector<std::string> kSpecKeys = {"base", "axes", "early_stopping", "slurm", "script"};

SlurmOptions parse_slurm(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("slurm", "must be an object {\"partition\", \"nodes\", ...}");
  const auto set = SlurmOptions::schema().erase();
  check_known_keys(j, "slurm", {&set}, {"sbatch"});
  auto slurm = SlurmOptions::schema().read(j, "slurm");
  if (j.contains("sbatch")) {
    const auto& lines = j["sbatch"];
    if (!lines.is_array() || lines.size() > 64)
      throw ConfigError("slurm.sbatch", "must be a list of at most 64 sbatch options, e.g. [\"--account=proj\"]");
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto field = "slurm.sbatch[" + std::to_string(i) + "]";
      if (!lines[i].is_string()) throw ConfigError(field, "must be a string such as \"--account=proj\"");
      const auto line = lines[i].get<std::string>();
      // sbatch reads a #SBATCH line up to its first blank: an option with one would lose its rest.
      if (line.rfind("--", 0) != 0 || line.size() < 3 || line.size() > 1000 ||
          std::any_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c) || c == 0; }))
        throw ConfigError(field, "must be one sbatch option starting with \"--\", without blanks (--account=proj), "
                                 "got '" + line + "'");
      slurm.sbatch.push_back(line);
    }
  }
  return slurm;
}

bool is_name_param(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".name") == 0;
}

SweepAxis parse_axis(const std::string& param, const nlohmann::json& j) {
  const auto field = "axes." + param;
  SweepAxis axis;
  axis.param = param;
  if (j.is_array()) {
    if (j.empty()) throw ConfigError(field, "lists no values");
    axis.values.assign(j.begin(), j.end());
    return axis;
  }
  if (!j.is_object())
    throw ConfigError(field, "must be a list of values or a range {\"min\", \"max\", \"log\", \"points\"}");
  for (const auto& [key, value] : j.items())
    if (key != "min" && key != "max" && key != "log" && key != "points" && key != "values")
      throw ConfigError(field + "." + key, "is not a key of an axis: use values, or min, max, log and points");
  if (j.contains("values")) return parse_axis(param, j["values"]);
  for (const char* key : {"min", "max"})
    if (!j.contains(key) || !j[key].is_number()) throw ConfigError(field + "." + key, "a range needs a number here");
  axis.min = j["min"].get<double>();
  axis.max = j["max"].get<double>();
  if (*axis.min > *axis.max) throw ConfigError(field, "min is above max");
  axis.log = j.value("log", false);
  if (axis.log && *axis.min <= 0) throw ConfigError(field + ".min", "a log-scaled range must start above 0");
  if (j.contains("points")) {
    if (!j["points"].is_number_integer() || j["points"].get<std::int64_t>() < 1)
      throw ConfigError(field + ".points", "must be an integer of at least 1");
    axis.points = j["points"].get<std::int64_t>();
  }
  return axis;
}

double range_point(const SweepAxis& axis, double fraction) {
  if (axis.log) return std::exp(std::log(*axis.min) + fraction * (std::log(*axis.max) - std::log(*axis.min)));
  return *axis.min + fraction * (*axis.max - *axis.min);
}

// A number for the parameter: integers are rounded.
nlohmann::json typed_number(const ParamSpec& spec, double v) {
  if (spec.kind == ParamKind::Integer) return static_cast<std::int64_t>(std::llround(v));
  return v;
}

// The values a grid takes along an axis.
std::vector<nlohmann::json> grid_values(const SweepAxis& axis, const ParamSpec& spec) {
  if (!axis.min) return axis.values;
  if (axis.points < 1)
    throw ConfigError("axes." + axis.param + ".points", "a grid over a range needs the number of points");
  std::vector<nlohmann::json> out;
  for (std::int64_t i = 0; i < axis.points; ++i) {
    const double fraction = axis.points == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(axis.points - 1);
    auto v = typed_number(spec, range_point(axis, fraction));
    if (out.empty() || out.back() != v) out.push_back(std::move(v));  // points rise along the range: repeats are adjacent
  }
  return out;
}

// hook.matrix_approximation_rank -> matrix_approximation_rank; hook.name -> hook.
std::string short_name(const std::string& path) {
  if (is_name_param(path)) return path.substr(0, path.size() - 5);
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// For a trial's label: drawn reals to four significant digits (the configuration keeps every digit).
std::string value_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number_float()) return v.dump();
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v.get<double>());
  return text;
}

}  // namespace

namespace {

void check_plan(const SweepSpec& spec, bool hooks_must_act);

// The spec's fields, checked; its trials are not planned yet.
SweepSpec parse_unplanned(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("", "a sweep specification must be a JSON object");
  const auto options_set = SweepOptions::schema().erase();
  check_known_keys(j, "", {&options_set}, kSpecKeys);
  SweepSpec spec;
  spec.options = SweepOptions::schema().read(j, "");
  if (j.contains("early_stopping")) {
    const auto& es = j["early_stopping"];
    const auto es_set = EarlyStoppingOptions::schema().erase();
    if (!es.is_object()) throw ConfigError("early_stopping", "must be an object {\"min_steps\", \"reduction_factor\"}");
    check_known_keys(es, "early_stopping", {&es_set});
    spec.early_stopping = EarlyStoppingOptions::schema().read(es, "early_stopping");
  }
  if (j.contains("slurm")) {
    if (spec.options.backend != "slurm")
      throw ConfigError("slurm", "applies to backend \"slurm\"; this sweep's backend is " + spec.options.backend);
    spec.slurm = parse_slurm(j["slurm"]);
  }
  if (j.contains("base")) {
    if (!j["base"].is_object()) throw ConfigError("base", "must be a run configuration (a JSON object)");
    spec.base = j["base"];
  }
  // "script": the base configuration's script section, given beside it (as `sweep --script` gives it).
  if (j.contains("script")) {
    if (!j["script"].is_object()) throw ConfigError("script", "must be a script section (a JSON object)");
    if (spec.base.contains("script")) throw ConfigError("script", "is given twice: here and in base.script");
    spec.base["script"] = j["script"];
  }
  if (spec.options.backend == "slurm") {
    // A trial's ranks are the job's: nodes x ranks_per_node.
    const auto ranks = spec.slurm.world_size();
    if (!spec.base.contains("world_size"))
      spec.base["world_size"] = ranks;
    else if (spec.base["world_size"] != nlohmann::json(ranks))
      throw ConfigError("base.world_size", "must be slurm.nodes x slurm.ranks_per_node (" + std::to_string(ranks) +
                                               ") for a SLURM sweep, or left out");
  }
  RunConfig base;
  try {
    base = RunConfig::parse(spec.base);
  } catch (const ConfigError& e) {
    throw e.within("base");
  }
  if (base.script.enabled() && spec.early_stopping.enabled() && base.script.steps_arg.empty())
    throw ConfigError("early_stopping", "ranks script trials at rungs of fewer steps, which only a script told its "
                                        "steps can run: set script.steps_arg to the script's option for them");
  if (spec.early_stopping.enabled() && spec.early_stopping.min_steps >= base.run.steps)
    throw ConfigError("early_stopping.min_steps",
                      "must be below the base configuration's steps (" + std::to_string(base.run.steps) + ")");

  if (j.contains("axes")) {
    const auto& axes = j["axes"];
    if (axes.is_object()) {
      // Entry names first: which hook a trial uses decides which parameters it has.
      for (int names_pass = 1; names_pass >= 0; --names_pass)
        for (const auto& [param, values] : axes.items())
          if (is_name_param(param) == (names_pass == 1)) spec.axes.push_back(parse_axis(param, values));
    } else if (axes.is_array()) {
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const auto& a = axes[i];
        if (!a.is_object() || !a.contains("param") || !a["param"].is_string())
          throw ConfigError("axes[" + std::to_string(i) + "]", "an axis needs \"param\" and its values or range");
        auto rest = a;
        rest.erase("param");
        spec.axes.push_back(parse_axis(a["param"].get<std::string>(), rest));
      }
    } else {
      throw ConfigError("axes", "must map parameter paths to their values");
    }
  }
  std::set<std::string> seen;
  for (const auto& axis : spec.axes) {
    if (!seen.insert(axis.param).second) throw ConfigError("axes." + axis.param, "appears twice");
    if (axis.min && spec.options.strategy == "grid" && axis.points < 1)
      throw ConfigError("axes." + axis.param + ".points", "a grid over a range needs the number of points");

  }
  if (spec.axes.empty() && !spec.options.baseline)
    throw ConfigError("axes", "a sweep needs at least one axis (or the baseline)");
  if (const auto count = count_trials(spec); count > spec.options.max_trials) {
    std::string sizes;
    for (const auto& axis : spec.axes)
      sizes += (sizes.empty() ? "" : " x ") + std::to_string(axis.min ? axis.points : std::int64_t(axis.values.size()));
    throw ConfigError("max_trials", "the sweep would run " +
                                        (count == std::numeric_limits<std::int64_t>::max() ? std::string("over 9e18")
                                                                                           : std::to_string(count)) +
                                        " trials (" + (spec.options.strategy == "grid" ? sizes : "random draws") +
                                        "), more than max_trials=" + std::to_string(spec.options.max_trials) +
                                        ": narrow the axes, or raise max_trials (up to 1000000)");
  }
  if (!spec.options.objective_network.empty()) net::link_preset(spec.options.objective_network, "objective_network");
  if (spec.options.seeds > 1 && spec.options.strategy == "tpe")
    throw ConfigError("seeds", "TPE draws each trial from the ones before it: replicate seeds with grid or random "
                               "search (or run the TPE sweep once per seed)");
  if (spec.options.seeds > 1 && spec.early_stopping.enabled())
    throw ConfigError("seeds", "successive halving ranks single runs: with seeds > 1, turn early_stopping off");
  if (spec.options.baseline && spec.options.strategy == "tpe")
    for (const auto& axis : spec.axes)
      if (axis.min && axis.param.rfind("hook.", 0) != 0)
        throw ConfigError("axes." + axis.param,
                          "TPE draws this range's values as the sweep runs, so no allreduce baseline can be planned "
                          "at each: list its values, or set baseline to false");
  return spec;
}

}  // namespace

SweepSpec SweepSpec::parse(const nlohmann::json& j) {
  auto spec = parse_unplanned(j);
  check_plan(spec, false);
  return spec;
}

namespace {

constexpr const char* kInactiveHint =
    " (set allow_inactive_hooks, --allow-inactive-hooks on the command line, if that is what you want)";

// Where a trial's parameter comes from in the sweep's file.
std::string field_of(const SweepSpec& spec, const std::string& param) {
  for (const auto& axis : spec.axes)
    if (axis.param == param) return "axes." + param;
  return "base." + param;
}

// The plan guard: a trial's hook must change what goes on the wire within its steps.
void check_hook_acts(const SweepSpec& spec, const PlannedTrial& trial, const std::optional<ConfigError>& size_problem) {
  const auto field_of = [&](const std::string& param) { return commtune::field_of(spec, param); };
  const auto config = trial.config.to_json();
  const auto steps = trial.config.run.steps;
  const auto activity = hook_activity(config);
  const auto where = " in trial '" + trial.label + "'";
  if (!activity.start_field.empty() && activity.first_active_step >= steps)
    throw ConfigError(field_of(activity.start_field),
                      std::to_string(activity.first_active_step) + " is not below steps (" + std::to_string(steps) +
                          ")" + where + ": its hook would never act, and the sweep would compare allreduce with "
                          "allreduce" + kInactiveHint);
  if (!activity.start_field.empty() && spec.early_stopping.enabled() &&
      activity.first_active_step >= spec.early_stopping.min_steps)
    throw ConfigError("early_stopping.min_steps",
                      std::to_string(spec.early_stopping.min_steps) + " is not above " + activity.start_field + " (" +
                          std::to_string(activity.first_active_step) + ")" + where +
                          ": at the first rung its hook has not acted yet, so successive halving would rank "
                          "allreduce runs" + kInactiveHint);
  if (size_problem) throw ConfigError(field_of(size_problem->field()), size_problem->problem() + where + kInactiveHint);
}

// Every trial's configuration must be valid (TPE's draws are made as the
// sweep runs: random draws from the same space are checked now), and for a
// new sweep every trial's hook must act: one pass over the plan, the hook
// checked once per configuration outside the seed and optimizer (which do
// not change whether it acts), so that a grid over learning rates and seeds
// checks its one hook once.
void check_plan(const SweepSpec& spec, bool hooks_must_act) {
  auto probe = spec;
  if (spec.options.strategy == "tpe") {
    probe.options.strategy = "random";
    probe.options.trials = std::min<std::int64_t>(spec.options.trials, 64);
    for_each_trial(spec, [](const PlannedTrial&) {});
  }
  // The engine checks what the components check in code, and sizes the hooks that must act, in one ask.
  EngineCheck engine;
  std::set<std::string> hooks_checked;
  std::vector<std::pair<PlannedTrial, std::size_t>> hooks;  // a trial per hook to check, with its model's ticket
  std::vector<PlannedTrial> script_hooks;
  for_each_trial(probe, [&](const PlannedTrial& trial) {
    engine.add_config(trial.config, trial.label);
    if (!hooks_must_act || trial.baseline) return;
    auto key = trial.config.to_json();
    key.erase("seed");
    key.erase("optimizer");
    if (!hooks_checked.insert(key.dump()).second) return;
    if (trial.config.script.enabled())
      script_hooks.push_back(trial);  // its model is the script's, which the engine cannot size
    else
      hooks.emplace_back(trial, engine.add_hook_size(trial.config));
  });
  if (const auto refusal = engine.ask())
    throw ConfigError(refusal->error.field().empty() ? "base" : field_of(spec, refusal->error.field()),
                      refusal->error.problem() + " in trial '" + refusal->label + "'");
  for (const auto& [trial, ticket] : hooks) check_hook_acts(spec, trial, engine.hook_size_problem(ticket));
  for (const auto& trial : script_hooks) check_hook_acts(spec, trial, std::nullopt);
}

}  // namespace

SweepSpec SweepSpec::parse_new(const nlohmann::json& j) {
  auto spec = parse_unplanned(j);
  // Only TPE and successive halving rank trials: elsewhere an objective would be silently ignored.
  const SweepOptions defaults;
  const bool ranks = spec.options.strategy == "tpe" || spec.early_stopping.enabled();
  if (!ranks && spec.options.objective != defaults.objective)
    throw ConfigError("objective", "is used by TPE and by successive halving (early_stopping) to rank trials; a " +
                                       spec.options.strategy + " sweep without early stopping runs every trial "
                                       "anyway: leave it out, or choose strategy tpe or early_stopping");
  if (!ranks && spec.options.objective_network != defaults.objective_network)
    throw ConfigError("objective_network", "applies to the step_time objective of TPE or successive halving; this " +
                                               spec.options.strategy + " sweep ranks nothing: leave it out");
  check_plan(spec, !spec.options.allow_inactive_hooks);  // after the checks above, as one pass
  return spec;
}

nlohmann::json SweepSpec::to_json() const {
  auto j = SweepOptions::schema().write(options);
  j["base"] = base;
  if (early_stopping.enabled()) j["early_stopping"] = EarlyStoppingOptions::schema().write(early_stopping);
  if (options.backend == "slurm") {
    j["slurm"] = SlurmOptions::schema().write(slurm);
    j["slurm"]["sbatch"] = slurm.sbatch;
  }
  nlohmann::json axes_json = nlohmann::json::array();
  for (const auto& a : axes) {
    nlohmann::json one = {{"param", a.param}};
    if (a.min) {
      one["min"] = *a.min;
      one["max"] = *a.max;
      one["log"] = a.log;
      if (a.points > 0) one["points"] = a.points;
    } else {
      one["values"] = a.values;
    }
    axes_json.push_back(std::move(one));
  }
  j["axes"] = axes_json;
  return j;
}

namespace {

// One trial's position along each axis: an index into its listed values or
// grid points, or a fraction of its range (random search).
using Position = std::vector<double>;

std::size_t axis_size(const SweepAxis& axis) {
  return axis.min ? static_cast<std::size_t>(std::max<std::int64_t>(axis.points, 1)) : axis.values.size();
}

// Calls visit(index, position) for each trial position, in plan order,
// keeping none of them: random search's draws from its seed, the grid's
// combinations with the last axis varying fastest.
template <class Visit>
void for_each_position(const SweepSpec& spec, Visit&& visit) {
  const auto& axes = spec.axes;
  if (axes.empty()) return;
  Position p(axes.size(), 0.0);
  if (spec.options.strategy == "random") {
    Draw draw(static_cast<std::uint64_t>(spec.options.seed));
    for (std::int64_t t = 0; t < spec.options.trials; ++t) {
      for (std::size_t a = 0; a < axes.size(); ++a)
        p[a] = axes[a].min ? draw.uniform() : static_cast<double>(draw.index(axes[a].values.size()));
      visit(t, p);
    }
    return;
  }
  for (const auto& axis : axes)
    if (axis_size(axis) == 0) return;
  for (std::int64_t t = 0;; ++t) {
    visit(t, p);
    std::size_t a = axes.size();
    while (a > 0) {
      --a;
      if (p[a] + 1 < static_cast<double>(axis_size(axes[a]))) {
        p[a] += 1;
        break;
      }
      p[a] = 0;
      if (a == 0) return;
    }
  }
}

nlohmann::json axis_value(const SweepSpec& spec, const SweepAxis& axis, double position, const ParamSpec& param) {
  if (!axis.min) return axis.values.at(static_cast<std::size_t>(position));
  if (spec.options.strategy != "grid") return typed_number(param, range_point(axis, position));
  // A real grid point directly (a plan of 10^6 trials asks once per trial);
  // integers may round to the same value, so their list drops repeats.
  if (param.kind != ParamKind::Integer && axis.points > 1)
    return typed_number(param, range_point(axis, position / static_cast<double>(axis.points - 1)));
  const auto values = grid_values(axis, param);
  if (values.size() < static_cast<std::size_t>(axis.points))  // more points than integers would plan a trial twice
    throw ConfigError("axes." + axis.param + ".points",
                      std::to_string(axis.points) + " points from " + value_text(*axis.min) + " to " +
                          value_text(*axis.max) + " round to " + std::to_string(values.size()) +
                          " integers: ask for at most " + std::to_string(values.size()) + " points, or list the values");
  return values.at(static_cast<std::size_t>(position));
}

bool section_has_name_axis(const SweepSpec& spec, const std::string& param) {
  const auto section = param.substr(0, param.find('.'));
  return std::any_of(spec.axes.begin(), spec.axes.end(),
                     [&](const SweepAxis& a) { return a.param == section + ".name"; });
}

}  // namespace

std::int64_t count_trials(const SweepSpec& spec) {
  if (spec.axes.empty()) return 0;
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  if (spec.options.strategy != "grid")
    return spec.options.trials > kMax / spec.options.seeds ? kMax : spec.options.trials * spec.options.seeds;
  std::int64_t count = 1;
  for (const auto& axis : spec.axes) {
    const auto size = static_cast<std::int64_t>(axis_size(axis));
    if (size == 0) return 0;
    count = count > kMax / size ? kMax : count * size;
  }
  const auto seeds = std::max<std::int64_t>(1, spec.options.seeds);
  return count > kMax / seeds ? kMax : count * seeds;
}

namespace {

// A trial's raw configuration at a position, with its axis values and label
// filled in (not yet parsed).
PlannedTrial raw_trial_at(const SweepSpec& spec, const std::vector<double>& position, nlohmann::json& raw) {
  raw = spec.base;
  PlannedTrial trial;
  for (std::size_t a = 0; a < spec.axes.size(); ++a) {
    const auto& axis = spec.axes[a];
    ParamSpec param;
    try {
      param = param_spec(raw, axis.param);
    } catch (const ConfigError& e) {
      if (section_has_name_axis(spec, axis.param)) continue;  // a parameter of another entry than this trial's
      throw ConfigError("axes." + axis.param, e.problem());
    }
    const auto value = axis_value(spec, axis, position.at(a), param);
    try {
      set_param(raw, axis.param, value);
    } catch (const ConfigError& e) {
      throw ConfigError("axes." + axis.param, e.problem());
    }
    trial.overrides[axis.param] = value;
    trial.label += (trial.label.empty() ? "" : " ") + short_name(axis.param) + "=" + value_text(value);
  }
  return trial;
}

}  // namespace

PlannedTrial trial_at(const SweepSpec& spec, const std::vector<double>& position) {
  nlohmann::json raw;
  auto trial = raw_trial_at(spec, position, raw);
  try {
    trial.config = RunConfig::parse(raw);
  } catch (const ConfigError& e) {
    throw ConfigError(e.field(), "in trial '" + trial.label + "': " + e.problem());
  }
  return trial;
}

std::vector<double> position_of(const SweepSpec& spec, const nlohmann::json& config) {
  std::vector<double> out;
  for (const auto& axis : spec.axes) {
    const nlohmann::json* value = &config;
    std::string_view rest = axis.param;
    while (value && !rest.empty()) {
      const auto dot = std::min(rest.find('.'), rest.size());
      const std::string key(rest.substr(0, dot));
      value = value->is_object() && value->contains(key) ? &(*value)[key] : nullptr;
      rest = dot < rest.size() ? rest.substr(dot + 1) : std::string_view();
    }
    double position = std::nan("");
    if (value && !axis.min) {
      const auto at = std::find(axis.values.begin(), axis.values.end(), *value);
      if (at != axis.values.end()) position = static_cast<double>(at - axis.values.begin());
    } else if (value && value->is_number()) {
      const double v = value->get<double>();
      const double lo = axis.log ? std::log(*axis.min) : *axis.min, hi = axis.log ? std::log(*axis.max) : *axis.max;
      position = hi > lo ? std::clamp(((axis.log ? std::log(v) : v) - lo) / (hi - lo), 0.0, 1.0) : 0.5;
    }
    out.push_back(position);
  }
  return out;
}

std::vector<TpeDimension> tpe_dimensions(const SweepSpec& spec) {
  std::vector<TpeDimension> out;
  for (const auto& axis : spec.axes) out.push_back({axis.min ? 0 : axis.values.size()});
  return out;
}

std::vector<std::string> non_hook_axes(const SweepSpec& spec) {
  std::vector<std::string> out;
  for (const auto& axis : spec.axes)
    if (axis.param.rfind("hook.", 0) != 0) out.push_back(axis.param);
  return out;
}

namespace {

// The allreduce baseline at some values of the non-hook axes.
PlannedTrial baseline_at(const SweepSpec& spec, const nlohmann::json& values) {
  auto raw = spec.base;
  PlannedTrial baseline;
  baseline.label = "baseline: allreduce";
  for (const auto& axis : spec.axes) {  // in the axes' order: entry names before their parameters
    if (!values.contains(axis.param)) continue;
    set_param(raw, axis.param, values[axis.param]);
    baseline.overrides[axis.param] = values[axis.param];
    baseline.label += " " + short_name(axis.param) + "=" + value_text(values[axis.param]);
  }
  raw["hook"] = {{"name", "allreduce"}};
  baseline.baseline = true;
  try {
    baseline.config = RunConfig::parse(raw);
  } catch (const ConfigError& e) {
    throw ConfigError(e.field(), "in trial '" + baseline.label + "': " + e.problem());
  }
  return baseline;
}

// Every combination of the listed values of `params` (TPE: its draws are not known yet).
std::vector<nlohmann::json> listed_combinations(const SweepSpec& spec, const std::vector<std::string>& params) {
  std::vector<nlohmann::json> out{nlohmann::json::object()};
  for (const auto& axis : spec.axes) {
    if (std::find(params.begin(), params.end(), axis.param) == params.end()) continue;
    std::vector<nlohmann::json> next;
    for (const auto& partial : out)
      for (const auto& v : axis.values) {
        auto j = partial;
        j[axis.param] = v;
        next.push_back(std::move(j));
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

namespace {

// Texts seen before, by a 128-bit fingerprint (two independent 64-bit
// hashes): a plan of 10^6 trials remembers 16 bytes per trial, not its
// configuration's text. Two different texts share a fingerprint with a
// chance of about n^2 / 2^129.
class SeenOnce {
 public:
  // True the first time a text is offered.
  bool first(std::string_view text) {
    std::uint64_t fnv = 1469598103934665603ull;
    for (const unsigned char c : text) fnv = (fnv ^ c) * 1099511628211ull;
    return seen_.insert({fnv, std::hash<std::string_view>{}(text)}).second;
  }

 private:
  struct Print {
    std::uint64_t a, b;
    bool operator==(const Print& o) const { return a == o.a && b == o.b; }
  };
  struct PrintHash {
    std::size_t operator()(const Print& p) const { return static_cast<std::size_t>(p.a ^ (p.b * 0x9e3779b97f4a7c15ull)); }
  };
  std::unordered_set<Print, PrintHash> seen_;
};

}  // namespace

void for_each_trial(const SweepSpec& spec, const std::function<void(const PlannedTrial&)>& visit) {
  SeenOnce planned_runs;
  std::int64_t planned = 0;
  const auto seeds = std::max<std::int64_t>(1, spec.options.seeds);
  // Each planned configuration once per seed; the same run twice is planned once.
  auto add = [&](PlannedTrial trial) {
    if (const auto seed = trial.config.run.seed; seed > kMaxSeed - (seeds - 1))
      throw ConfigError("seeds", std::to_string(seeds) + " seeds from seed " + std::to_string(seed) + " reach seed " +
                                     std::to_string(seed + seeds - 1) + ", above the largest seed " +
                                     std::to_string(kMaxSeed) + ": lower seed or seeds");
    const auto label = trial.label;
    const auto seed = trial.config.run.seed;
    for (std::int64_t k = 0; k < seeds; ++k) {
      if (seeds > 1) {
        trial.config.run.seed = seed + k;
        trial.label = label + (label.empty() ? "" : " ") + "seed=" + std::to_string(seed + k);
      }
      if (!planned_runs.first(trial.config.to_json().dump())) continue;
      trial.index = planned++;
      visit(trial);
    }
  };

  const bool tpe = spec.options.strategy == "tpe" && !spec.axes.empty();
  if (spec.options.baseline) {
    // A baseline at each combination of values the trials take outside the
    // hook, in the order the trials first take them: found in a pass over
    // the positions that keeps only where each new combination first appears.
    const auto outside = non_hook_axes(spec);
    const auto values_outside = [&](const PlannedTrial& trial) {
      nlohmann::json values = nlohmann::json::object();
      for (const auto& param : outside)
        if (trial.overrides.contains(param)) values[param] = trial.overrides[param];
      return values;
    };
    if (tpe) {
      for (const auto& values : listed_combinations(spec, outside)) add(baseline_at(spec, values));
    } else {
      SeenOnce combinations;
      std::vector<std::int64_t> first_at;
      nlohmann::json raw;
      for_each_position(spec, [&](std::int64_t t, const Position& p) {
        if (combinations.first(values_outside(raw_trial_at(spec, p, raw)).dump())) first_at.push_back(t);
      });
      if (first_at.empty()) add(baseline_at(spec, nlohmann::json::object()));
      std::size_t next = 0;
      for_each_position(spec, [&](std::int64_t t, const Position& p) {
        if (next < first_at.size() && first_at[next] == t) {
          ++next;
          add(baseline_at(spec, values_outside(raw_trial_at(spec, p, raw))));
        }
      });
    }
  }
  if (tpe) {
    // Each trial's values are drawn when it starts, from the trials finished by then.
    PlannedTrial trial;
    trial.config = RunConfig::parse(spec.base);
    trial.to_draw = true;
    for (std::int64_t t = 0; t < spec.options.trials; ++t) {
      trial.index = planned++;
      trial.label = "TPE draw " + std::to_string(t + 1) + " (made when it starts)";
      visit(trial);
    }
    return;
  }
  for_each_position(spec, [&](std::int64_t, const Position& p) { add(trial_at(spec, p)); });
}

std::vector<PlannedTrial> plan_trials(const SweepSpec& spec) {
  std::vector<PlannedTrial> trials;
  for_each_trial(spec, [&](const PlannedTrial& t) { trials.push_back(t); });
  return trials;
}

std::int64_t planned_trial_count(const SweepSpec& spec) {
  std::int64_t n = 0;
  for_each_trial(spec, [&](const PlannedTrial&) { ++n; });
  return n;
}

}  // namespace commtune

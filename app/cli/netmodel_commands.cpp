// Will it pay off? `predict` a stored run's step time on other networks from
// its measured profile; `recommend` the configuration to use on one, or say
// to keep allreduce; `--export` writes it out for production.
#include <cmath>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/tuner/export/production_export.h"
#include "core/tuner/netmodel/cost_model.h"
#include "core/tuner/verdict/recommend.h"
#include "core/tuner/verdict/slowmo_advice.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/verdict/evidence.h"

namespace commtune::cli {
namespace {

struct ClusterArgs {
  std::vector<std::string> networks;
  std::optional<int> nodes;
  int gpus_per_node = 1;
  std::string intra = "nvlink";
  std::optional<double> bandwidth_gbit, latency_us;
};

void add_cluster_options(CLI::App& command, ClusterArgs& args, const std::string& default_networks) {
  command
      .add_option(
          "--network", args.networks,
          "link between nodes: 100mbit, 1gbit, 10gbit, 25gbit, 100gbit or nvlink (default " + default_networks + ")")
      ->delimiter(',');
  command.add_option("--bandwidth-gbit", args.bandwidth_gbit, "a custom link between nodes: bandwidth in Gbit/s")
      ->check(number_between(0, 1e6, true));
  command.add_option("--latency-us", args.latency_us, "and its latency in microseconds (default 20)")
      ->check(number_between(0, 1e9));
  command.add_option("--nodes", args.nodes, "nodes in the target cluster (default: the run's ranks)")
      ->check(number_between(1, 1e6));
  command.add_option("--gpus-per-node", args.gpus_per_node, "ranks per node (default 1)")->check(number_between(1, 1024));
  command.add_option("--intra", args.intra, "link between ranks of one node (default nvlink)");
}

// One cluster per network named, with `ranks` spread over nodes when
// --nodes is not given.
std::vector<net::Cluster> clusters(const ClusterArgs& args, int ranks, const std::vector<std::string>& defaults) {
  auto shape = net::Cluster::of({}, ranks, args.gpus_per_node, args.nodes.value_or(0),
                                net::link_preset(args.intra, "--intra"));
  std::vector<net::Cluster> out;
  if (args.bandwidth_gbit) {
    shape.inter = net::custom_link(*args.bandwidth_gbit, args.latency_us.value_or(20));
    out.push_back(shape);
  } else if (args.latency_us) {
    throw std::invalid_argument("--latency-us goes with --bandwidth-gbit (a custom link)");
  }
  for (const auto& name : args.networks.empty() && out.empty() ? defaults : args.networks) {
    shape.inter = net::link_preset(name, "--network");
    out.push_back(shape);
  }
  // On one node no link between nodes is used: every network would be the same column.
  if (shape.nodes == 1) out.resize(1);
  return out;
}

struct ComputeArgs {
  std::optional<double> scale;
  std::vector<double> forward_backward_ms;
  std::optional<std::int64_t> from_run;
};

void add_compute_options(CLI::App& command, ComputeArgs& args) {
  auto* scale = command
                    .add_option("--compute-scale", args.scale,
                                "the target computes this many times as long as the measured run (0.05: 20x faster)")
                    ->check(number_between(0, 1e6, true));
  auto* given = command
                    .add_option("--compute-ms", args.forward_backward_ms,
                                "the target's forward and backward time per step in ms: FWD,BWD")
                    ->delimiter(',')
                    ->expected(2)
                    ->check(number_between(0, 1e9, true));
  auto* from = command.add_option("--compute-from", args.from_run,
                                  "take compute from this run, recorded on the target machine (same model and batch)");
  scale->excludes(given)->excludes(from);
  given->excludes(from);
}

TargetCompute target_compute(const ComputeArgs& args, const db::Store& store) {
  TargetCompute compute;
  if (args.scale) {
    compute.kind = TargetCompute::Kind::Scaled;
    compute.scale = *args.scale;
  } else if (!args.forward_backward_ms.empty()) {
    compute.kind = TargetCompute::Kind::Given;
    compute.forward_s = args.forward_backward_ms.at(0) / 1e3;
    compute.backward_s = args.forward_backward_ms.at(1) / 1e3;
  } else if (args.from_run) {
    compute.kind = TargetCompute::Kind::FromRun;
    // As every prediction sees a run: its compute pooled over its steps (here, its alone).
    const auto target = Evidence::gather(store, std::vector<std::int64_t>{*args.from_run}, {0, 0});
    if (target.configurations().empty()) throw db::Error("there is no run " + std::to_string(*args.from_run));
    if (!target.profile_problem(0).empty()) throw db::Error(target.profile_problem(0));
    compute.target_run = target.profile(0);
  }
  return compute;
}

struct PredictArgs {
  std::vector<std::int64_t> runs;
  std::optional<std::int64_t> sweep, baseline;
  ClusterArgs cluster;
  ComputeArgs compute;
  bool as_json = false;
};

// "12.30 (11.90-12.80)": a figure with its 95% interval.
std::string with_interval(const Estimate& e, double scale) {
  if (std::isnan(e.value)) return "-";
  auto text = format("%.2f", scale * e.value);
  if (e.has_interval()) text += " (" + format("%.2f", scale * e.low) + "-" + format("%.2f", scale * e.high) + ")";
  return text;
}

// A speedup and its interval, with the digits that keep each on its side of 1.0 (recommend.h, digits_beside).
std::string speedup_cell(const Estimate& e) {
  if (std::isnan(e.value)) return "-";
  auto text = digits_beside(e.value, {1.0}) + "x";
  if (e.has_interval()) text += " (" + digits_beside(e.low, {1.0}) + "-" + digits_beside(e.high, {1.0}) + ")";
  return text;
}

int predict_command(const PredictArgs& args, const Context& context) {
  const auto store = open_store(context.db);
  auto ids = select_runs(*store, args.runs, args.sweep);
  if (ids.empty()) throw std::invalid_argument("nothing to predict: name runs, or a sweep with --sweep");
  if (args.baseline && std::find(ids.begin(), ids.end(), *args.baseline) == ids.end()) {
    if (!store->run(*args.baseline)) throw std::invalid_argument("there is no run " + std::to_string(*args.baseline));
    ids.insert(ids.begin(), *args.baseline);
  }
  std::vector<std::int64_t> finished;
  std::string unfinished;
  for (const auto id : ids) {
    const auto run = store->run(id);
    if (run && is_measured(run->status))
      finished.push_back(id);
    else
      unfinished += (unfinished.empty() ? "" : ", ") + ("run " + std::to_string(id)) + " " +
                    (run ? run->status : std::string("does not exist"));
  }
  if (finished.empty()) throw std::invalid_argument(unfinished + ": nothing measured to predict from");
  const auto evidence = Evidence::gather(*store, finished);
  const auto compute = target_compute(args.compute, *store);
  const auto& configs = evidence.configurations();
  std::optional<std::size_t> forced;
  if (args.baseline) forced = evidence.configuration_of(*args.baseline);
  std::vector<std::size_t> shown;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    if (!evidence.profile_problem(c).empty()) {
      std::cerr << "commtune: run " << configs[c].runs.front() << ": " << evidence.profile_problem(c) << "\n";
      continue;
    }
    shown.push_back(c);
  }
  if (shown.empty()) throw std::invalid_argument("none of these runs can be profiled: nothing to predict from");
  const auto targets = clusters(args.cluster, evidence.profile(shown.front()).world_size,
                                {"100mbit", "1gbit", "10gbit", "25gbit", "100gbit"});
  const auto compute_text = compute.kind == TargetCompute::Kind::Measured
                                ? "compute: this machine's, " + evidence.compute_source(shown.front())
                                : compute.describe();

  auto out = nlohmann::json::array();
  std::vector<std::string> notes;
  std::vector<std::string> headers{"run", "label", "seeds", "measured ms"};
  for (const auto& c : targets) headers.push_back(c.network_name() + " ms");
  for (const auto& c : targets) headers.push_back(c.network_name() + " speedup");
  Table table(headers);
  for (const auto c : shown) {
    const auto& config = configs[c];
    const auto& p = evidence.profile(c);
    const auto baseline = forced ? forced : evidence.baseline_of(c);
    const bool is_baseline = baseline && *baseline == c;
    std::vector<std::string> cells{std::to_string(config.runs.front()) + (is_baseline ? "*" : ""), config.label,
                                   std::to_string(config.seed_count()), format("%.2f", 1e3 * p.measured_step_s)};
    std::vector<std::string> speedups;
    auto predictions = nlohmann::json::array();
    for (const auto& cluster : targets) {
      const auto step = evidence.predicted_step_s(c, cluster, compute);
      cells.push_back(with_interval(step, 1e3));
      auto j = predict(on_target(p, compute), cluster).to_json();
      j["step_s_interval"] = step.to_json();
      j["cluster"] = cluster.describe();
      j["network"] = cluster.network_name();
      if (baseline && evidence.profile_problem(*baseline).empty()) {
        const auto speedup = evidence.speedup(c, *baseline, cluster, compute);
        speedups.push_back(speedup_cell(speedup) + (speedup.includes(1.0) ? " ~" : ""));
        j["speedup_over_allreduce"] = speedup.value;
        j["speedup_interval"] = speedup.to_json();
        j["measurable"] = !speedup.includes(1.0);
      } else {
        speedups.push_back("-");
      }
      predictions.push_back(j);
    }
    cells.insert(cells.end(), speedups.begin(), speedups.end());
    table.add(cells);
    out.push_back({{"run_id", config.runs.front()},
                   {"runs", config.runs},
                   {"label", config.label},
                   {"baseline_run", baseline ? nlohmann::json(configs[*baseline].runs.front()) : nlohmann::json(nullptr)},
                   {"profile", on_target(p, compute).to_json()},
                   {"predictions", predictions}});
    if (config.config.is_object() && config.config.value("hook", nlohmann::json::object()).value("name", "") == "slowmo") {
      const auto run = store->run(config.runs.front(), /*with_summary=*/true);  // its parameter count
      auto guidance = nlohmann::json::array();
      for (const auto& cluster : targets)
        guidance.push_back(slowmo_advice(run->summary.value("parameter_count", 0.0),
                                         run->config["hook"].value("localsgd_frequency", 1.0),
                                         on_target(p, compute).backward_s, cluster)
                               .to_json());
      out.back()["slowmo_guidance"] = guidance;
      for (const auto& g : guidance)
        notes.push_back("run " + std::to_string(config.runs.front()) + ": " + g["text"].get<std::string>());
    }
  }
  if (args.as_json) {
    std::cout << nlohmann::json{{"baseline_run", forced ? nlohmann::json(*args.baseline) : nlohmann::json(nullptr)},
                                {"compute", compute_text},
                                {"run_to_run", evidence.run_to_run().to_json()},
                                {"runs", out}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << "predicted step time on " << targets.front().describe().substr(0, targets.front().describe().find(','))
            << "; " << compute_text << "\n";
  table.print(std::cout);
  std::cout << "(95% intervals in parentheses, from resampling runs and steps; * a baseline; speedups are over the "
               "allreduce run with the same settings outside the hook; ~ the interval holds 1.0: no measurable "
               "difference)\n"
            << "(" << evidence.run_to_run().describe() << ")\n";
  for (const auto& note : notes) std::cout << note << "\n";
  return kExitOk;
}

struct RecommendArgs {
  std::vector<std::int64_t> runs;
  std::optional<std::int64_t> sweep, baseline;
  ClusterArgs cluster;
  ComputeArgs compute;
  double tolerance = 0.01, min_speedup = 1.05;
  std::size_t intervals = RecommendOptions{}.intervals;
  std::string export_dir;
  bool as_json = false;
};

int recommend_command(const RecommendArgs& args, const Context& context) {
  const auto store = open_store(context.db);
  const auto ids = select_runs(*store, args.runs, args.sweep);
  if (ids.empty()) throw std::invalid_argument("nothing to choose from: name runs, or a sweep with --sweep");
  RecommendOptions options;
  options.tolerance = args.tolerance;
  options.min_speedup = args.min_speedup;
  options.intervals = args.intervals;
  options.baseline_run = args.baseline;
  options.compute = target_compute(args.compute, *store);
  auto runs = store->runs(ids);  // read once: for the network's ranks and the evidence
  if (runs.empty()) throw std::invalid_argument("nothing to choose from: the runs named are gone");
  // The network has as many nodes as the baseline has ranks; recommend() adds a named one to the runs.
  std::optional<db::RunRecord> named;
  if (args.baseline && !(named = store->run(*args.baseline)))
    throw std::invalid_argument("--baseline: there is no run " + std::to_string(*args.baseline));
  const auto* reference = named ? &*named : find_allreduce_baseline(runs);
  const int ranks = static_cast<int>((reference ? *reference : runs.front()).world_size);
  const auto targets = clusters(args.cluster, ranks, {"10gbit"});
  if (targets.size() != 1) throw std::invalid_argument("recommend answers for one network: name one with --network");
  options.cluster = targets.front();
  const auto r = recommend(*store, std::move(runs), options);

  std::vector<std::string> files;
  if (!args.export_dir.empty() && r.chosen_run) {
    files = export_for_production(store->run(*r.chosen_run)->config, "", args.export_dir);
  }
  if (args.as_json) {
    auto head = r.summary_json();
    head["exported"] = files;
    // 10^5 candidates are formatted on every core, never as one tree.
    write_json_object_and_array(std::cout, head, "candidates", r.candidates.size(),
                                [&](std::size_t i) { return r.candidates[i].to_json(); });
    std::cout << "\n";
    return kExitOk;
  }
  std::cout << "on " << r.cluster.describe() << " (" << r.compute << "), loss within " << format("%g%%", 100 * r.tolerance)
            << " of allreduce's at the same settings:\n";
  Table table({"run", "label", "seeds", "tail loss", "vs base", "predicted ms", "speedup", "outcome"});
  for (const auto& c : r.candidates) {
    auto loss = format_optional("%.5f", c.loss);
    if (c.loss_sd) loss += " ±" + format("%.5f", *c.loss_sd);
    table.add({std::to_string(c.run_id) + (c.is_baseline ? "*" : ""), c.label, std::to_string(c.seeds), loss,
               c.is_baseline || !c.baseline_run ? "-" : c.loss_change.describe(), with_interval(c.step_s, 1e3),
               c.is_baseline ? "-" : speedup_cell(c.speedup), c.reason});
  }
  table.print(std::cout);
  if (r.candidates.size() > r.intervals)
    std::cout << "(95% intervals for the " << r.intervals
              << " fastest predicted and the one judged; the others show their points: --intervals N draws more)\n";
  std::cout << "(" << r.run_to_run.describe() << ")\n\n" << r.verdict << "\n";
  if (!args.export_dir.empty()) {
    if (files.empty()) std::cout << "nothing exported: allreduce needs no hook\n";
    for (const auto& f : files) std::cout << "exported " << f << "\n";
  }
  return kExitOk;
}

}  // namespace

void add_netmodel_commands(CLI::App& app, Context& context) {
  auto predict_args = std::make_shared<PredictArgs>();
  auto* predict_cmd = app.add_subcommand(
      "predict", "predict stored runs' step time on other networks from what they measured (docs/network-model.md)");
  predict_cmd->add_option("runs", predict_args->runs, "run ids");
  predict_cmd->add_option("--sweep", predict_args->sweep, "the trials of this sweep");
  predict_cmd->add_option("--baseline", predict_args->baseline, "speedups over this run (default: the allreduce run)");
  add_cluster_options(*predict_cmd, predict_args->cluster, "100mbit,1gbit,10gbit,25gbit,100gbit");
  add_compute_options(*predict_cmd, predict_args->compute);
  predict_cmd->add_flag("--json", predict_args->as_json,
                        "machine-readable, with each configuration's profile (the pooled compute, its own hook and "
                        "collectives)");
  predict_cmd->callback([predict_args, &context] { context.exit_code = predict_command(*predict_args, context); });

  auto recommend_args = std::make_shared<RecommendArgs>();
  auto* recommend_cmd =
      app.add_subcommand("recommend",
                         "the configuration with the best predicted step time whose loss stays near allreduce's, or "
                         "'keep allreduce'");
  recommend_cmd->add_option("runs", recommend_args->runs, "run ids");
  recommend_cmd->add_option("--sweep", recommend_args->sweep, "the trials of this sweep");
  recommend_cmd->add_option("--baseline", recommend_args->baseline, "the allreduce run to compare with");
  add_cluster_options(*recommend_cmd, recommend_args->cluster, "10gbit");
  add_compute_options(*recommend_cmd, recommend_args->compute);
  recommend_cmd
      ->add_option("--tolerance", recommend_args->tolerance,
                   "how much worse a loss may be than the baseline's, relative (default 0.01: 1%)")
      ->check(number_between(0, 10));
  recommend_cmd
      ->add_option("--min-speedup", recommend_args->min_speedup,
                   "predicted speedups below this are within the model's error (default 1.05)")
      ->check(number_between(1, 100));
  recommend_cmd
      ->add_option("--intervals", recommend_args->intervals,
                   "how many of the fastest predicted candidates get 95% intervals (default 50; the one judged "
                   "always does)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 30));
  recommend_cmd->add_option("--export", recommend_args->export_dir,
                            "write the recommended configuration here for production (export production)");
  recommend_cmd->add_flag("--json", recommend_args->as_json, "machine-readable");
  recommend_cmd->callback(
      [recommend_args, &context] { context.exit_code = recommend_command(*recommend_args, context); });
}

}  // namespace commtune::cli

// Reading the run store: `list` runs (or sweeps), `show` one run or sweep,
// `compare` runs side by side against their allreduce baseline.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/store/run_label.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/store/run_query.h"
#include "core/tuner/verdict/run_comparison.h"

namespace commtune::cli {
namespace {

// A sweep's trial by its number; "-" for a run outside a sweep.
std::string trial_text(const db::RunRecord& r) {
  return r.trial_number() ? std::to_string(*r.trial_number()) : "-";
}

std::string steps_text(const db::RunRecord& r) {
  return std::to_string(r.steps_completed) + "/" + std::to_string(r.steps_requested);
}

struct ListArgs {
  std::optional<std::int64_t> sweep;
  std::vector<std::string> statuses, params;
  std::string search, sort = "id";
  bool descending = false, as_json = false, sweeps = false;
  std::int64_t limit = 0;
};

int list_sweeps(const db::Store& store, bool as_json) {
  const auto sweeps = store.sweeps();
  if (as_json) {
    auto out = nlohmann::json::array();
    for (const auto& s : sweeps) out.push_back(sweep_json(store, s));
    std::cout << json_text(out, 2) << "\n";
    return kExitOk;
  }
  Table table({"sweep", "name", "status", "trials", "ended", "created"});
  for (const auto& s : sweeps) {
    std::int64_t trials = 0, ended = 0;
    for (const auto& [status, count] : store.trial_statuses(s.id)) {
      trials += count;
      if (db::status::is_end(status)) ended += count;
    }
    table.add({std::to_string(s.id), s.name, s.status, std::to_string(trials), std::to_string(ended),
               format_time(s.created_at)});
  }
  table.print(std::cout);
  return kExitOk;
}

int list_command(const ListArgs& args, const Context& context) {
  const auto store = open_store(context.db);
  if (args.sweeps) return list_sweeps(*store, args.as_json);
  db::RunFilter filter;
  filter.sweep_id = args.sweep;
  filter.statuses = args.statuses;
  for (const auto& p : args.params) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument("--param wants NAME=VALUE (e.g. hook.name=powersgd), got '" + p + "'");
    const auto name = p.substr(0, eq);
    if (!is_parameter_name(name))
      throw std::invalid_argument("--param: there is no parameter '" + name +
                                  "' (`commtune-cli params` lists them, e.g. hook.matrix_approximation_rank)");
    filter.params.emplace_back(name, p.substr(eq + 1));
  }
  filter.order_by = args.sort;
  filter.descending = args.descending;
  RunQuery query;
  try {
    query = RunQuery::parse(args.search);
  } catch (const QueryError& e) {
    throw std::invalid_argument(std::string("--search: ") + e.what());
  }
  // The figures a query reads (tail loss, ms/step) come from each run's steps:
  // the limit applies to the runs that match.
  if (query.empty()) filter.limit = args.limit;
  filter.with_digest = !query.empty();  // the query's figures; the listing shows none
  auto runs = store->runs(filter);
  if (!query.empty()) {
    runs.erase(std::remove_if(runs.begin(), runs.end(),
                              [&](const db::RunRecord& r) {
                                return !query.matches(query_row(r, describe_hook(r), digest_run(*store, r)));
                              }),
               runs.end());
    if (args.limit > 0 && runs.size() > static_cast<std::size_t>(args.limit)) runs.resize(args.limit);
  }
  if (args.as_json) {
    write_json_array(std::cout, runs.size(), [&](std::size_t i) { return run_json(runs[i], false); });
    std::cout << "\n";
    return kExitOk;
  }
  Table table(
      {"run", "sweep", "trial", "name", "status", "hook", "ranks", "steps", "last loss", "wall s", "created"});
  for (const auto& r : runs)
    table.add({std::to_string(r.id), r.sweep_id ? std::to_string(*r.sweep_id) : "-",
               trial_text(r),
               r.name.empty() ? "-" : r.name, r.status, describe_hook(r), std::to_string(r.world_size),
               steps_text(r), format_optional("%.4f", r.final_loss), format("%.1f", r.wall_s),
               format_time(r.created_at)});
  table.print(std::cout);
  if (runs.empty()) std::cerr << "commtune: no runs match in " << store->path() << "\n";
  return kExitOk;
}

int show_sweep(const db::Store& store, std::int64_t id, bool as_json) {
  const auto sweep = store.sweep(id);
  if (!sweep) throw db::Error("there is no sweep " + std::to_string(id) + " in " + store.path());
  if (as_json) {
    std::cout << json_text(sweep_json(store, *sweep), 2) << "\n";
    return kExitOk;
  }
  std::cout << "sweep " << sweep->id << " '" << printable(sweep->name) << "': " << sweep->status << ", created "
            << format_time(sweep->created_at) << "\n"
            << json_text(sweep->spec, 2) << "\n\n";
  db::RunFilter filter;
  filter.sweep_id = id;
  Table table({"trial", "run", "label", "status", "steps", "last loss", "reason"});
  for (const auto& r : store.runs(filter))
    table.add({trial_text(r), std::to_string(r.id), r.name, r.status, steps_text(r),
               format_optional("%.4f", r.final_loss), r.reason.empty() ? "-" : r.reason});
  table.print(std::cout);
  return kExitOk;
}

int show_command(std::optional<std::int64_t> run_id, std::optional<std::int64_t> sweep_id, bool as_json,
                 bool config_only, const Context& context) {
  const auto store = open_store(context.db);
  if (sweep_id) return show_sweep(*store, *sweep_id, as_json);
  if (!run_id) throw std::invalid_argument("show wants a run id, or --sweep ID");
  const auto run = store->run(*run_id, /*with_summary=*/true);
  if (!run) throw db::Error("there is no run " + std::to_string(*run_id) + " in " + store->path());
  if (config_only) {
    if (!run->config_problem.empty())
      throw db::Error("run " + std::to_string(run->id) + "'s stored configuration is unreadable: " +
                      printable(run->config_problem));
    std::cout << json_text(run->config, 2) << "\n";
    return kExitOk;
  }
  const auto digest = digest_run(*store, *run);
  auto events = nlohmann::json::array();
  for (const auto& e : store->events(run->id))
    if (e.kind != "checkpoint")
      events.push_back({{"rank", e.rank}, {"time", e.time}, {"kind", e.kind}, {"body", e.body}});
  auto artifacts = nlohmann::json::array();
  for (const auto& a : store->artifacts(run->id))
    artifacts.push_back({{"kind", a.kind}, {"path", a.path}, {"created_at", a.created_at}});
  if (as_json) {
    auto out = run_json(*run, true);
    out["digest"] = digest_json(digest);
    out["stats"] = store->stat_names(run->id);
    out["events"] = events;
    out["artifacts"] = artifacts;
    std::cout << json_text(out, 2) << "\n";
    return kExitOk;
  }
  std::cout << "run " << run->id << (run->name.empty() ? "" : " '" + printable(run->name) + "'") << ": "
            << printable(run->status) << (run->reason.empty() ? "" : " (" + printable(run->reason) + ")") << "\n";
  if (!run->config_problem.empty())
    std::cout << "  configuration is unreadable: " << printable(run->config_problem) << "\n";
  if (run->sweep_id) std::cout << "  sweep        " << *run->sweep_id << ", trial " << trial_text(*run) << "\n";
  std::cout << "  hook         " << printable(describe_hook(*run)) << "\n"
            << "  ranks        " << run->world_size << " on " << printable(run->host) << "\n"
            << "  steps        " << steps_text(*run) << "\n"
            << "  created      " << format_time(run->created_at) << "\n"
            << "  wall         " << format("%.1f s", run->wall_s) << "\n"
            << "  fingerprint  " << printable(run->fingerprint) << "\n"
            << "  last loss    " << format_optional("%.5f", digest.last_loss) << "\n"
            << "  tail loss    " << format_optional("%.5f", digest.loss) << " (mean of the last "
            << tail_window(digest.steps) << " steps)\n"
            << "  ms/step      " << format_optional("%.2f", digest.step_ms) << " (median of the steady second half)\n"
            << "  on the wire  " << format_optional("%.3f MB/step", digest.wire_mb) << ", compression "
            << format_optional("%.1fx", digest.compression_ratio) << "\n";
  std::cout << "parameters:\n";
  for (const auto& [name, value] : run_params(*run))
    std::cout << "  " << printable(name) << " = " << printable(json_text(value)) << "\n";
  std::cout << "statistics: ";
  for (const auto& name : store->stat_names(run->id)) std::cout << printable(name) << " ";
  std::cout << "\n";
  for (const auto& e : events)
    std::cout << "event rank " << e["rank"] << " " << printable(e["kind"].get<std::string>()) << ": "
              << printable(json_text(e["body"])) << "\n";
  for (const auto& a : artifacts)
    std::cout << "artifact " << printable(a["kind"].get<std::string>()) << ": "
              << printable(a["path"].get<std::string>()) << "\n";
  return kExitOk;
}

}  // namespace

int compare_command(const CompareArgs& args, const Context& context) {
  const auto store = open_store(context.db);
  const auto ids = select_runs(*store, args.runs, args.sweep);
  if (ids.empty()) throw std::invalid_argument("nothing to compare: name runs, or a sweep with --sweep");
  const auto comparison = compare_runs(*store, ids, args.baseline);
  const auto& columns = comparison.differing;
  if (args.as_json) {
    const auto row = [&](std::size_t i) {
      const auto& c = comparison.runs[i];
      auto j = run_json(c.run, false);
      j["params"] = nlohmann::json::object();
      for (const auto& name : columns) {
        const auto it = c.params.find(name);
        j["params"][name] = it == c.params.end() ? nlohmann::json(nullptr) : it->second;
      }
      j["digest"] = digest_json(c.digest);
      j["loss_change"] = optional_json(c.loss_change);
      j["no_loss_change_because"] = c.no_loss_change.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.no_loss_change);
      j["baseline"] = c.is_baseline;
      j["baseline_run"] = optional_json(c.baseline_run);
      return j;
    };
    write_json_object_and_array(std::cout,
                                {{"baseline_run", optional_json(comparison.baseline_run)},
                                 {"params", columns},
                                 {"configurations", comparison.configurations},
                                 {"pareto_front", pareto_front(comparison.pareto_by_wire)}},
                                "runs", comparison.runs.size(), row);
    std::cout << "\n";
    return kExitOk;
  }
  std::vector<std::string> headers{"run", "label", "status", "steps"};
  for (const auto& c : columns) headers.push_back(c.substr(c.find('.') + 1));
  for (const char* h : {"tail loss", "vs base", "ms/step", "MB/step", "compr"}) headers.push_back(h);
  Table table(headers);
  for (const auto& c : comparison.runs) {
    std::vector<std::string> cells{std::to_string(c.run.id) + (c.is_baseline ? "*" : ""), c.label, c.run.status,
                                   steps_text(c.run)};
    // Six significant digits, as a person reads them; --json keeps every digit.
    for (const auto& name : columns) {
      const auto it = c.params.find(name);
      cells.push_back(param_text(it == c.params.end() ? nlohmann::json(nullptr) : it->second));
    }
    cells.push_back(format_optional("%.5f", c.digest.loss));
    cells.push_back(c.loss_change ? format("%+.2f%%", 100 * *c.loss_change) : "-");
    cells.push_back(format_optional("%.2f", c.digest.step_ms));
    cells.push_back(format_optional("%.3f", c.digest.wire_mb));
    cells.push_back(format_optional("%.1fx", c.digest.compression_ratio));
    table.add(cells);
  }
  table.print(std::cout);
  std::cout << (comparison.any_baseline ? "* a baseline (allreduce); vs base: against the allreduce run with the same settings "
                               "outside the hook and the same seed; "
                             : "no allreduce baseline among these runs; ")
            << "tail loss: mean over ranks and the last 10% of steps (inf: it diverged); ms/step: median over the "
               "steady second half\n";
  // Why a run's vs base is "-", each reason once with its runs.
  std::vector<std::pair<std::string, std::string>> unchanged;  // reason, runs
  for (const auto& c : comparison.runs) {
    if (c.no_loss_change.empty()) continue;
    auto at = std::find_if(unchanged.begin(), unchanged.end(), [&](const auto& u) { return u.first == c.no_loss_change; });
    if (at == unchanged.end()) at = unchanged.insert(unchanged.end(), {c.no_loss_change, ""});
    at->second += (at->second.empty() ? "" : ", ") + std::to_string(c.run.id);
  }
  for (const auto& [reason, runs] : unchanged)
    std::cout << "vs base is - for run" << (runs.find(',') != std::string::npos ? "s " : " ") << runs << ": "
              << printable(reason) << "\n";
  if (const auto front = pareto_front(comparison.pareto_by_wire); !front.empty()) {
    std::string runs;
    for (const auto id : front) runs += (runs.empty() ? "" : ", ") + std::to_string(id);
    std::cout << "Pareto front (mean tail loss against MB on the wire, one point per configuration): run"
              << (front.size() > 1 ? "s " : " ") << runs
              << "; a loss step smaller than the seeds' spread or vs base's interval may be noise\n";
  }
  if (!comparison.configurations.empty()) {
    std::cout << "\nconfigurations run with several seeds:\n";
    Table seeds_table({"runs", "label", "seeds", "tail loss mean", "sd", "vs base (95% interval)"});
    for (const auto& j : comparison.configurations) {
      std::string list;
      for (const auto& id : j["runs"]) list += (list.empty() ? "" : ",") + std::to_string(id.get<std::int64_t>());
      seeds_table.add({list, j["label"].get<std::string>(), std::to_string(j["seeds"].get<std::size_t>()),
                       format_optional("%.5f", figure_from_json(j["tail_loss_mean"])),
                       format_optional("%.5f", figure_from_json(j["tail_loss_sd"])),
                       j.value("loss_change_text", std::string("-"))});
    }
    seeds_table.print(std::cout);
  }
  return kExitOk;
}

void add_store_commands(CLI::App& app, Context& context) {
  auto list_args = std::make_shared<ListArgs>();
  auto* list = app.add_subcommand("list", "list stored runs (newest last), or sweeps with --sweeps");
  list->add_option("--sweep", list_args->sweep, "only the trials of this sweep");
  list->add_option("--status", list_args->statuses, "only runs with this status (repeatable)")
      ->check(CLI::IsMember({db::status::kPending, db::status::kRunning, db::status::kPaused, db::status::kSucceeded,
                             db::status::kFailed, db::status::kDiverged, db::status::kCancelled,
                             db::status::kInterrupted, db::status::kStopped}));
  list->add_option("--search", list_args->search,
                   "only the runs this query finds: conditions NAME OP VALUE, comma-separated (tail_loss < 1.1, "
                   "hook.matrix_approximation_rank = 2, tag = best; OP: = != < <= > >=), and free text in any value");
  list->add_option("--param", list_args->params, "only runs with this parameter value: NAME=VALUE (repeatable)");
  list->add_option("--sort", list_args->sort, "order by id, created, name, status, steps, final_loss or wall")
      ->check(CLI::IsMember({"id", "created", "name", "status", "steps", "final_loss", "wall"}));
  list->add_flag("--desc", list_args->descending, "in descending order");
  list->add_option("--limit", list_args->limit, "at most this many runs")->check(CLI::NonNegativeNumber);
  list->add_flag("--sweeps", list_args->sweeps, "list sweeps instead of runs");
  list->add_flag("--json", list_args->as_json, "machine-readable");
  list->callback([list_args, &context] { context.exit_code = list_command(*list_args, context); });

  struct ShowArgs {
    std::optional<std::int64_t> run, sweep;
    bool as_json = false, config = false;
  };
  auto show_args = std::make_shared<ShowArgs>();
  auto* show = app.add_subcommand("show", "one stored run in full (or a sweep with --sweep)");
  show->add_option("run", show_args->run, "run id");
  show->add_option("--sweep", show_args->sweep, "show this sweep and its trials instead");
  show->add_flag("--json", show_args->as_json, "machine-readable");
  show->add_flag("--config", show_args->config, "only the run's configuration, as a file `run -c` takes");
  show->callback([show_args, &context] {
    context.exit_code = show_command(show_args->run, show_args->sweep, show_args->as_json, show_args->config, context);
  });

  auto compare_args = std::make_shared<CompareArgs>();
  auto* compare = app.add_subcommand(
      "compare", "runs side by side: what differs, loss against the allreduce baseline, step time, bytes");
  compare->add_option("runs", compare_args->runs, "run ids (default: the sweep's trials)");
  compare->add_option("--sweep", compare_args->sweep, "every trial of this sweep");
  compare->add_option("--baseline", compare_args->baseline,
                      "compare losses with this run (default: the allreduce run)");
  compare->add_flag("--json", compare_args->as_json, "machine-readable");
  compare->callback([compare_args, &context] { context.exit_code = compare_command(*compare_args, context); });
}

}  // namespace commtune::cli

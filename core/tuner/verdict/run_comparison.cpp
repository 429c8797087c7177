#include "core/tuner/verdict/run_comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "core/tuner/store/run_label.h"
#include "core/tuner/store/run_query.h"
#include "core/tuner/verdict/evidence.h"

namespace commtune {

namespace {

bool is_bookkeeping(const std::string& name) { return name.rfind("checkpoint.", 0) == 0 || name.rfind("debug.", 0) == 0; }

// Every parameter (run_params' names) at or below `path` in `j`.
void add_names(const nlohmann::json& j, std::string& path, std::set<std::string>& out) {
  if (!j.is_object()) {
    out.insert(path);
    return;
  }
  const auto length = path.size();
  for (const auto& [key, value] : j.items()) {
    path.append(length ? "." : "").append(key);
    add_names(value, path, out);
    path.resize(length);
  }
}

// The parameters where two configurations differ, or that one of them
// lacks, walking both trees side by side (their keys are in order) with one
// path that grows and shrinks: no copies, so comparing 10^5 runs with the
// first costs little.
void add_differences(const nlohmann::json& a, const nlohmann::json& b, std::string& path, std::set<std::string>& out) {
  if (!a.is_object() || !b.is_object()) {
    if (a.is_object() || b.is_object()) {
      add_names(a, path, out);
      add_names(b, path, out);
    } else if (a != b) {
      out.insert(path);
    }
    return;
  }
  const auto length = path.size();
  const auto below = [&](const std::string& key) -> std::string& { return path.append(length ? "." : "").append(key); };
  auto x = a.begin(), y = b.begin();
  while (x != a.end() || y != b.end()) {
    if (y == b.end() || (x != a.end() && x.key() < y.key())) {
      add_names(*x, below(x.key()), out);
      ++x;
    } else if (x == a.end() || y.key() < x.key()) {
      add_names(*y, below(y.key()), out);
      ++y;
    } else {
      add_differences(*x, *y, below(x.key()), out);
      ++x, ++y;
    }
    path.resize(length);
  }
}

// Parameters the runs disagree on, or that only some of them have: each
// run's configuration against the first's. A run whose configuration
// cannot be read (its config_problem says why) has no parameters to weigh.
std::vector<std::string> differing_params(const std::vector<db::RunRecord>& runs, std::size_t count) {
  std::set<std::string> names;
  std::string path;
  const db::RunRecord* first = nullptr;
  for (std::size_t i = 0; i < count; ++i) {
    if (!runs[i].config_problem.empty()) continue;
    if (first)
      add_differences(first->config, runs[i].config, path, names);
    else
      first = &runs[i];
  }
  std::vector<std::string> out;
  for (const auto& name : names)
    if (!is_bookkeeping(name)) out.push_back(name);
  return out;
}

}  // namespace

std::string param_text(const nlohmann::json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value.get<double>());
    return text;
  }
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

RunComparison compare_runs(const db::Store& store, const std::vector<std::int64_t>& ids,
                           std::optional<std::int64_t> baseline) {
  RunComparison out;
  auto records = store.runs(ids);  // each run read once, for the evidence and then the rows
  const auto compared = records.size();
  if (baseline && std::find(ids.begin(), ids.end(), *baseline) == ids.end()) {
    auto named = store.run(*baseline);
    if (!named) throw std::invalid_argument("there is no run " + std::to_string(*baseline));
    records.push_back(std::move(*named));
  }
  // Losses only: no step times, so no run's steps are read.
  EvidenceOptions losses;
  losses.replicates = 0;
  losses.profiles = false;
  losses.configurations = false;
  const auto evidence = Evidence::gather(store, records, losses);
  out.differing = differing_params(records, compared);
  for (std::size_t i = 0; i < compared; ++i) {
    ComparedRun c;
    c.label = run_label(records[i]);
    for (const auto& name : out.differing)
      if (auto value = run_param(records[i], name); !value.is_null()) c.params[name] = std::move(value);
    c.digest = digest_run(store, records[i]);
    c.run = std::move(records[i]);
    out.runs.push_back(std::move(c));
  }

  const auto& configs = evidence.configurations();
  const auto baseline_config = [&](std::size_t c) -> std::optional<std::size_t> {
    if (baseline) return evidence.configuration_of(*baseline);
    return evidence.baseline_of(c);
  };
  // A run's baseline run: the one of its baseline configuration with the same seed, else its first.
  const auto baseline_run_of = [&](const db::RunRecord& run) -> std::optional<std::int64_t> {
    const auto c = evidence.configuration_of(run.id);
    if (!c) return std::nullopt;
    const auto b = baseline_config(*c);
    if (!b) return std::nullopt;
    const auto& base = configs[*b];
    const auto seed = run.config.is_object() ? run.config.value("seed", std::int64_t{0}) : 0;
    for (std::size_t i = 0; i < base.runs.size(); ++i)
      if (base.seeds[i] == seed) return base.runs[i];
    return base.runs.front();
  };
  std::map<std::int64_t, const ComparedRun*> by_id;
  for (const auto& c : out.runs) by_id[c.run.id] = &c;
  // A baseline outside the runs is the one named (the evidence holds no other run).
  const auto named_loss = records.size() > compared ? digest_run(store, records[compared]).loss : std::nullopt;
  for (auto& c : out.runs) {
    c.baseline_run = baseline_run_of(c.run);
    c.is_baseline = c.baseline_run && *c.baseline_run == c.run.id;
    out.any_baseline = out.any_baseline || c.is_baseline;
    if (!c.baseline_run) {
      const auto config = evidence.configuration_of(c.run.id);
      c.no_loss_change = config && !baseline ? evidence.baseline_problem(*config) : "it has no baseline";
      continue;
    }
    const auto known = by_id.find(*c.baseline_run);
    const auto base_loss = known != by_id.end() ? known->second->digest.loss : named_loss;
    const auto& loss = c.digest.loss;
    const auto base = "its baseline's (run " + std::to_string(*c.baseline_run) + ")";
    if (!loss)
      c.no_loss_change = "its tail loss is not in the store";
    else if (!std::isfinite(*loss))
      c.no_loss_change = "it diverged";
    else if (!base_loss)
      c.no_loss_change = base + " tail loss is not in the store";
    else if (!std::isfinite(*base_loss))
      c.no_loss_change = base + " diverged";
    else if (*base_loss == 0)
      c.no_loss_change = base + " tail loss is 0";
    else
      c.loss_change = *loss / *base_loss - 1;
  }
  for (std::size_t c = 0; c < configs.size(); ++c) {
    if (configs[c].runs.size() < 2) continue;
    const auto b = baseline_config(c);
    nlohmann::json j{{"runs", configs[c].runs},
                     {"label", configs[c].label},
                     {"seeds", configs[c].seed_count()},
                     {"tail_loss_mean", figure_json(configs[c].mean_loss())},
                     {"tail_loss_sd", figure_json(configs[c].loss_sd())}};
    if (b && *b != c) {
      const auto change = evidence.loss_change(c, *b);
      j["baseline_runs"] = configs[*b].runs;
      j["loss_change"] = change.change.to_json();
      j["loss_change_text"] = change.describe();
    }
    out.configurations.push_back(std::move(j));
  }
  std::vector<TradeOff> by_wire;
  for (const auto& config : configs)
    if (const auto first = by_id.find(config.runs.front()); first != by_id.end() && first->second->digest.wire_mb)
      by_wire.push_back({first->first, *first->second->digest.wire_mb, config.mean_loss()});
  out.pareto_by_wire = pareto_order(std::move(by_wire));
  out.baseline_run = baseline;
  for (const auto& c : out.runs)
    if (!out.baseline_run && c.is_baseline) out.baseline_run = c.run.id;
  return out;
}

}  // namespace commtune

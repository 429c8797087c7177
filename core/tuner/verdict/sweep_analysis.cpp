#include "core/tuner/verdict/sweep_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <tuple>

#include "core/tuner/netmodel/network.h"
#include "core/tuner/store/run_label.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/store/run_query.h"
#include "core/tuner/sweep/sweep_spec.h"
#include "core/tuner/verdict/recommend.h"
#include "core/tuner/verdict/slowmo_advice.h"
#include "db/store.h"

namespace commtune {

namespace {

net::Cluster cluster_for(const SweepAnalysisQuery& q, const std::string& link, int world_size) {
  return net::Cluster::of(net::link_preset(link, "network"), world_size, q.ranks_per_node, q.nodes);
}

// The SlowMo configurations among the evidence's, with their first run (its parameter count).
std::vector<std::pair<std::size_t, db::RunRecord>> slowmo_runs(const db::Store& store, const Evidence& evidence) {
  std::vector<std::pair<std::size_t, db::RunRecord>> out;
  for (std::size_t c = 0; c < evidence.configurations().size(); ++c) {
    const auto& config = evidence.configurations()[c].config;
    const auto hook = config.is_object() ? config.find("hook") : config.end();
    if (!evidence.profile_problem(c).empty() || hook == config.end() || !hook->is_object() ||
        hook->value("name", "") != "slowmo")
      continue;
    auto run = store.run(evidence.configurations()[c].runs.front(), /*with_summary=*/true);
    if (run && run->summary.is_object()) out.emplace_back(c, std::move(*run));
  }
  return out;
}

// SlowMo's advice on `cluster` for each of them.
std::vector<std::string> slowmo_notes(const std::vector<std::pair<std::size_t, db::RunRecord>>& slowmo,
                                      const Evidence& evidence, const TargetCompute& compute,
                                      const net::Cluster& cluster) {
  std::vector<std::string> notes;
  for (const auto& [c, run] : slowmo) {
    const auto advice =
        slowmo_advice(run.summary.value("parameter_count", 0.0), run.config["hook"].value("localsgd_frequency", 1.0),
                      on_target(evidence.profile(c), compute).backward_s, cluster);
    notes.push_back("run " + std::to_string(run.id) + ": " + advice.text);
  }
  return notes;
}

// For each preset network, the recommendation `recommend --network NAME` gives:
// the candidates judged once (nothing in that depends on the network).
std::vector<NetworkAdvice> advice(const db::Store& store, const Evidence& evidence, const SweepAnalysisQuery& q,
                                  int world_size) {
  std::vector<std::pair<std::size_t, db::RunRecord>> slowmo;
  std::string unread;  // why the SlowMo runs could not be read: each network's verdict
  try {
    slowmo = slowmo_runs(store, evidence);
  } catch (const std::exception& e) {
    unread = e.what();
  }
  RecommendOptions options;
  options.compute = q.compute;
  options.tolerance = q.tolerance;
  options.intervals = NetworkAdvice::kShownReasons;  // the reasons' candidates; the judged one is always drawn
  options.reasons = NetworkAdvice::kShownReasons;
  std::optional<JudgedCandidates> judged;
  std::string unjudged;
  try {
    judged = judge_candidates(evidence, options);
  } catch (const std::exception& e) {
    unjudged = e.what();
  }
  std::vector<NetworkAdvice> out;
  for (const auto& link : net::link_presets()) {
    NetworkAdvice row;
    row.network = link.name;
    try {
      options.cluster = cluster_for(q, link.name, world_size);
      row.network = options.cluster.describe();
      if (!unread.empty()) throw std::runtime_error(unread);
      row.slowmo = slowmo_notes(slowmo, evidence, q.compute, options.cluster);
      if (!judged) throw std::runtime_error(unjudged);
      const auto r = recommend(evidence, *judged, options);
      row.verdict = r.verdict;
      row.baseline_run = r.baseline_run;
      for (const auto& c : r.candidates) {
        if (!c.is_baseline && row.reasons.size() == NetworkAdvice::kShownReasons) ++row.reasons_left;
        if (!c.is_baseline && row.reasons.size() < NetworkAdvice::kShownReasons)
          row.reasons.push_back("run " + std::to_string(c.run_id) + " " + c.label +
                                (std::isfinite(c.step_s.value) ? ", " + digits_beside(c.step_s.value * 1e3, {}) + " ms"
                                                                : std::string()) +
                                ": " + c.reason);
        if (c.run_id == r.baseline_run) row.baseline_ms = c.step_s.value * 1e3;
        if (r.chosen_run && c.run_id == *r.chosen_run) {
          row.best_run = c.run_id;
          row.best = std::to_string(c.run_id) + " " + c.label;
          row.best_ms = c.step_s.value * 1e3;
          row.speedup = c.speedup;
        }
      }
      if (!r.chosen_run) row.best = "keep allreduce";
    } catch (const std::exception& e) {
      row.verdict = e.what();
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

std::string tail_loss_text(const AnalysedRun& run) {
  if (!std::isfinite(run.loss_mean)) return "diverged";
  char text[96];
  if (run.seeds <= 1)
    std::snprintf(text, sizeof text, "tail loss %.5g", run.loss_mean);
  else if (std::isfinite(run.loss_sd))
    std::snprintf(text, sizeof text, "mean tail loss of %d seeds %.5g ± %.2g", run.seeds, run.loss_mean, run.loss_sd);
  else
    std::snprintf(text, sizeof text, "mean tail loss of %d seeds %.5g", run.seeds, run.loss_mean);
  return text;
}

SweepAnalysis analyse_sweep(const db::Store& store, const SweepAnalysisQuery& q) {
  db::RunFilter filter;
  if (q.sweep_id) filter.sweep_id = q.sweep_id;
  filter.statuses = measured_statuses();
  SweepAnalysis out;
  out.sweep_id = q.sweep_id;
  if (q.sweep_id)
    if (const auto sweep = store.sweep(q.sweep_id))
      for (const auto& axis : SweepSpec::parse(sweep->spec).axes) {
        out.axes.push_back(axis.param);
        if (axis.log) out.log_axes.insert(axis.param);
      }
  auto runs = store.runs(filter);
  // What each run says alone first; then the runs go to the evidence, which keeps their configurations.
  int world_size = 1;            // the last run's: the networks' recommendations are for it
  std::vector<int> world_sizes;  // each analysed run's: its own prediction is for it
  for (const auto& run : runs) {
    const auto digest = digest_run(store, run);
    if (!digest.loss) continue;
    AnalysedRun p;
    p.run_id = run.id;
    p.trial = run.trial_number();
    p.label = run_label(run);
    p.loss = *digest.loss;
    p.wire_mb = digest.wire_mb;
    p.step_ms = digest.step_ms;
    p.loss_mean = p.loss;
    world_size = static_cast<int>(run.world_size);
    world_sizes.push_back(world_size);
    for (const auto& axis : out.axes)
      if (const auto value = run_param(run, axis); !value.is_null()) p.axis_values[axis] = param_value_text(value);
    out.runs.push_back(std::move(p));
  }
  // One read of every run; the pooled compute and the replicates drawn serve every network below.
  const auto evidence = Evidence::gather(store, std::move(runs));
  out.run_to_run = evidence.run_to_run().describe();
  for (std::size_t i = 0; i < out.runs.size(); ++i) {
    auto& p = out.runs[i];
    const auto c = evidence.configuration_of(p.run_id);
    if (!c) continue;
    const auto& config = evidence.configurations()[*c];
    p.configuration_run = config.runs.front();
    p.seeds = static_cast<int>(config.seed_count());
    p.loss_mean = config.mean_loss();
    p.loss_sd = config.loss_sd();
    const auto baseline = evidence.baseline_of(*c);
    p.baseline = baseline && *baseline == *c;
    if (evidence.profile_problem(*c).empty()) {
      p.predicted_ms = 1e3 * evidence
                                 .predicted_step_s(*c, cluster_for(q, q.link, world_sizes[i]), q.compute,
                                                   Evidence::Interval::PointOnly)
                                 .value;
    }
  }
  std::string diverged;
  for (const auto& p : out.runs)
    if (!std::isfinite(p.loss)) diverged += (diverged.empty() ? "" : ", ") + std::to_string(p.run_id);
  if (!diverged.empty())
    out.note = "Diverged (a NaN or infinite loss), so ranked worst and left off the Pareto plot: run " + diverged + ". ";
  {
    std::vector<Trial> trials;
    for (const auto& p : out.runs) {
      if (p.baseline) continue;  // allreduce is the reference, not a point of the swept space
      Trial t{{}, p.loss};
      for (const auto& axis : out.axes) {
        const auto it = p.axis_values.find(axis);
        t.values.push_back(it == p.axis_values.end() ? std::string() : it->second);
      }
      trials.push_back(std::move(t));
    }
    out.importance = parameter_importance(out.axes, trials);
  }
  if (out.runs.empty()) {
    out.note =
        q.sweep_id ? "This sweep has no finished trials yet." : "No finished runs yet: start one on the Launch page.";
    return out;
  }
  if (std::none_of(out.runs.begin(), out.runs.end(), [](const AnalysedRun& p) { return p.baseline; })) {
    out.note += "No allreduce baseline among these runs: the what-if table needs one (sweeps add it with \"baseline\").";
    return out;
  }
  out.networks = advice(store, evidence, q, world_size);
  return out;
}

std::pair<std::string, std::string> default_heatmap_axes(const SweepAnalysis& analysis) {
  // In a sweep over hooks: the learning rate and the hook rather than the
  // hook and a compressor only BytePS trials have.
  std::pair<std::string, std::string> best;
  std::tuple<int, int, int> best_score{-1, -1, -1};
  const auto& axes = analysis.axes;
  for (std::size_t i = 0; i < axes.size(); ++i)
    for (std::size_t j = i + 1; j < axes.size(); ++j) {
      const auto &a = axes[i], &b = axes[j];
      int both = 0;
      std::set<std::string> a_values, b_values;
      bool a_numeric = true, b_numeric = true;
      for (const auto& p : analysis.runs) {
        const auto ia = p.axis_values.find(a), ib = p.axis_values.find(b);
        if (ia == p.axis_values.end() || ib == p.axis_values.end()) continue;
        ++both;
        a_values.insert(ia->second);
        b_values.insert(ib->second);
        a_numeric = a_numeric && finite_number(ia->second);
        b_numeric = b_numeric && finite_number(ib->second);
      }
      const std::tuple<int, int, int> score{both > 0 && a_values.size() > 1 && b_values.size() > 1, both,
                                            int(a_numeric) + int(b_numeric)};
      if (score > best_score) {
        best_score = score;
        // The parameter with more values across.
        best = a_values.size() >= b_values.size() ? std::pair{a, b} : std::pair{b, a};
      }
    }
  return best;
}

bool value_before(const std::string& a, const std::string& b) {
  const auto da = finite_number(a), db = finite_number(b);
  if (da && db) return *da < *db;
  if (da || db) return da.has_value();
  return a < b;
}

HeatmapGrid heatmap_grid(const SweepAnalysis& analysis, const std::string& xa, const std::string& ya) {
  HeatmapGrid grid;
  if (xa == ya) return grid;
  std::set<std::string> xs, ys;
  std::size_t both = 0;
  bool numeric = true;
  for (const auto& p : analysis.runs)
    if (p.axis_values.count(xa) && p.axis_values.count(ya)) {
      xs.insert(p.axis_values.at(xa));
      ys.insert(p.axis_values.at(ya));
      ++both;
      numeric = numeric && finite_number(p.axis_values.at(xa)) && finite_number(p.axis_values.at(ya));
    }
  grid.xs.assign(xs.begin(), xs.end());
  grid.ys.assign(ys.begin(), ys.end());
  std::sort(grid.xs.begin(), grid.xs.end(), value_before);
  std::sort(grid.ys.begin(), grid.ys.end(), value_before);
  grid.gridded = !(numeric && both >= 4 && grid.xs.size() * grid.ys.size() > 2 * both);
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> index;  // cell -> its place in grid.cells
  std::set<std::int64_t> seen;
  for (const auto& p : analysis.runs) {
    if (!p.axis_values.count(xa) || !p.axis_values.count(ya)) continue;
    if (!seen.insert(p.configuration()).second) continue;  // a configuration once
    grid.max_seeds = std::max(grid.max_seeds, p.seeds);
    const auto i = static_cast<std::size_t>(std::find(grid.xs.begin(), grid.xs.end(), p.axis_values.at(xa)) - grid.xs.begin());
    const auto j = static_cast<std::size_t>(std::find(grid.ys.begin(), grid.ys.end(), p.axis_values.at(ya)) - grid.ys.begin());
    const auto [at, fresh] = index.emplace(std::pair{i, j}, grid.cells.size());
    if (fresh) grid.cells.push_back({i, j, {}, INFINITY, 0});
    auto& cell = grid.cells[at->second];
    cell.configurations.push_back(&p);
    if (std::isfinite(p.loss_mean)) {
      ++cell.finite;
      cell.best = std::min(cell.best, p.loss_mean);
    }
  }
  return grid;
}

Slice slice_of(const SweepAnalysis& analysis, const std::string& param) {
  Slice slice;
  std::set<std::int64_t> seen;
  for (const auto& p : analysis.runs)
    if (p.axis_values.count(param) && std::isfinite(p.loss_mean) && seen.insert(p.configuration()).second)
      slice.points.push_back(&p);
  slice.numeric = !slice.points.empty();
  for (const auto* p : slice.points) {
    const auto& text = p->axis_values.at(param);
    if (const auto v = finite_number(text)) {
      slice.lo = std::min(slice.lo, *v);
      slice.hi = std::max(slice.hi, *v);
    } else {
      slice.numeric = false;
    }
    if (std::find(slice.categories.begin(), slice.categories.end(), text) == slice.categories.end())
      slice.categories.push_back(text);
  }
  std::sort(slice.categories.begin(), slice.categories.end(), value_before);
  const auto x_of = [&](const AnalysedRun& p) {
    const auto& text = p.axis_values.at(param);
    return slice.numeric ? *finite_number(text)
                         : double(std::find(slice.categories.begin(), slice.categories.end(), text) -
                                  slice.categories.begin());
  };
  std::stable_sort(slice.points.begin(), slice.points.end(),
                   [&](const auto* a, const auto* b) { return x_of(*a) < x_of(*b); });
  for (std::size_t k = 0; k < slice.points.size(); ++k) {
    slice.x.push_back(x_of(*slice.points[k]));
    if (!slice.best || slice.points[k]->loss_mean < slice.points[*slice.best]->loss_mean) slice.best = k;
  }
  return slice;
}

}  // namespace commtune

#include "core/tuner/verdict/sweep_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "core/tuner/store/run_query.h"

namespace commtune {

namespace {

// The trials of the search: every run but the allreduce baselines, in the order they ran.
std::vector<const AnalysedRun*> trials_of(const SweepAnalysis& analysis) {
  std::vector<const AnalysedRun*> out;
  for (const auto& run : analysis.runs)
    if (!run.baseline) out.push_back(&run);
  std::sort(out.begin(), out.end(), [](const AnalysedRun* a, const AnalysedRun* b) { return a->run_id < b->run_id; });
  return out;
}

// The baselines' configurations once each: their seeds' mean tail loss.
std::vector<const AnalysedRun*> baseline_configurations(const SweepAnalysis& analysis) {
  std::vector<const AnalysedRun*> out;
  std::set<std::int64_t> seen;
  for (const auto& run : analysis.runs)
    if (run.baseline && std::isfinite(run.loss_mean) && seen.insert(run.configuration()).second) out.push_back(&run);
  return out;
}

// Ranks from 1, ties sharing their mean rank.
std::vector<double> ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (std::size_t k = i; k <= j; ++k) out[order[k]] = rank;
    i = j + 1;
  }
  return out;
}

std::optional<double> pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return std::nullopt;
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

}  // namespace

OptimizationHistory optimization_history(const SweepAnalysis& analysis) {
  OptimizationHistory out;
  std::optional<double> best;
  // A sweep's trials at their numbers; the store's runs of several sweeps (and none) at their place in
  // the order they ran, where sweeps' numbers would repeat.
  auto trials = trials_of(analysis);
  const bool numbered = analysis.sweep_id != 0 && std::all_of(trials.begin(), trials.end(), [](const AnalysedRun* r) {
                          return r->trial.has_value();
                        });
  if (numbered)
    std::stable_sort(trials.begin(), trials.end(),
                     [](const AnalysedRun* a, const AnalysedRun* b) { return *a->trial < *b->trial; });
  std::int64_t ordinal = 0;
  for (const auto* run : trials) {
    ++ordinal;
    HistoryPoint p{run->run_id, numbered ? *run->trial : ordinal, run->loss, best, false};
    if (std::isfinite(run->loss)) {
      p.improved = !best || run->loss < *best;
      if (p.improved) best = run->loss;
      p.best = best;
    } else {
      ++out.diverged;
    }
    out.trials.push_back(p);
  }
  const auto baselines = baseline_configurations(analysis);
  if (!baselines.empty()) {
    double sum = 0;
    for (const auto* b : baselines) sum += b->loss_mean;
    out.baseline_loss = sum / static_cast<double>(baselines.size());
  }
  return out;
}

double EmpiricalDistribution::at(double loss) const {
  const auto it = std::upper_bound(losses.begin(), losses.end(), loss);
  return it == losses.begin() ? 0.0 : fractions[static_cast<std::size_t>(it - losses.begin()) - 1];
}

EmpiricalDistribution empirical_distribution(const SweepAnalysis& analysis) {
  EmpiricalDistribution out;
  for (const auto* run : trials_of(analysis)) {
    ++out.trials;
    if (std::isfinite(run->loss))
      out.losses.push_back(run->loss);
    else
      ++out.diverged;
  }
  std::sort(out.losses.begin(), out.losses.end());
  for (std::size_t i = 0; i < out.losses.size(); ++i)
    out.fractions.push_back(static_cast<double>(i + 1) / static_cast<double>(out.trials));
  return out;
}

std::string ParamCorrelation::sign() const {
  if (!rho || *rho == 0) return "";
  return *rho > 0 ? "+" : "\u2212";
}

std::vector<ParamCorrelation> loss_correlations(const SweepAnalysis& analysis) {
  std::vector<ParamCorrelation> out;
  const auto trials = trials_of(analysis);
  for (const auto& param : analysis.axes) {
    ParamCorrelation c{param, std::nullopt, 0};
    std::vector<double> xs, losses;
    bool words = false;
    for (const auto* run : trials) {
      const auto it = run->axis_values.find(param);
      if (it == run->axis_values.end() || !std::isfinite(run->loss)) continue;
      const auto v = finite_number(it->second);
      if (!v) {
        words = true;
        break;
      }
      xs.push_back(*v);
      losses.push_back(run->loss);
    }
    c.trials = static_cast<int>(xs.size());
    if (!words && xs.size() >= 3) c.rho = pearson(ranks(xs), ranks(losses));
    out.push_back(c);
  }
  return out;
}

SliceBaseline slice_baseline(const SweepAnalysis& analysis, const std::string& param) {
  SliceBaseline out;
  const auto baselines = baseline_configurations(analysis);
  out.runs = static_cast<int>(baselines.size());
  if (baselines.empty()) return out;
  std::map<std::string, std::pair<double, int>> by_value;  // value -> (sum, count)
  double sum = 0;
  for (const auto* b : baselines) {
    sum += b->loss_mean;
    if (const auto it = b->axis_values.find(param); it != b->axis_values.end()) {
      by_value[it->second].first += b->loss_mean;
      ++by_value[it->second].second;
    }
  }
  if (by_value.empty()) {
    out.level = sum / static_cast<double>(baselines.size());
    return out;
  }
  for (const auto& [value, total] : by_value) out.at_values.emplace_back(value, total.first / total.second);
  std::sort(out.at_values.begin(), out.at_values.end(),
            [](const auto& a, const auto& b) { return value_before(a.first, b.first); });
  return out;
}

ScatterMatrix scatter_matrix(const SweepAnalysis& analysis) {
  ScatterMatrix out;
  out.rows = {"tail loss", "ms/step"};
  const auto trials = trials_of(analysis);
  for (const auto& param : analysis.axes) {
    ScatterColumn column;
    column.param = param;
    std::vector<std::string> values;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto* run : trials)
      if (const auto it = run->axis_values.find(param); it != run->axis_values.end()) {
        if (std::find(values.begin(), values.end(), it->second) == values.end()) values.push_back(it->second);
        if (const auto v = finite_number(it->second)) {
          lo = std::min(lo, *v);
          hi = std::max(hi, *v);
        } else {
          column.numeric = false;
        }
      }
    if (!column.numeric) {
      std::sort(values.begin(), values.end(), value_before);
      column.categories = values;
    } else {
      column.log = lo > 0 && hi / lo > 100;
    }
    out.columns.push_back(std::move(column));
  }
  for (const auto* run : trials) {
    ScatterTrial t{run->run_id, {}, {}};
    for (const auto& column : out.columns) {
      const auto it = run->axis_values.find(column.param);
      if (it == run->axis_values.end()) {
        t.x.emplace_back();
      } else if (column.numeric) {
        t.x.push_back(finite_number(it->second));
      } else {
        const auto at = std::find(column.categories.begin(), column.categories.end(), it->second);
        t.x.emplace_back(static_cast<double>(at - column.categories.begin()));
      }
    }
    t.y.push_back(std::isfinite(run->loss) ? std::optional<double>(run->loss) : std::nullopt);
    t.y.push_back(run->step_ms);
    out.trials.push_back(std::move(t));
  }
  return out;
}

}  // namespace commtune

#include "core/tuner/sweep/param_importance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <locale>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/tuner/sweep/draw.h"

namespace commtune {

namespace {

// The C locale's reading, whatever locale the app runs in ("0.05" is a
// number even where the decimal separator is a comma).
std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::istringstream in(text);
  in.imbue(std::locale::classic());
  double value = 0;
  in >> value;
  if (in.fail() || in.peek() != std::char_traits<char>::eof() || !std::isfinite(value)) return std::nullopt;
  return value;
}

bool is_name_axis(const std::string& param) {
  static const std::string suffix = ".name";
  return param.size() >= suffix.size() && param.compare(param.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Population mean and variance.
std::pair<double, double> mean_variance(const std::vector<double>& ys) {
  const double n = static_cast<double>(ys.size());
  const double mean = std::accumulate(ys.begin(), ys.end(), 0.0) / n;
  double ss = 0;
  for (double y : ys) ss += (y - mean) * (y - mean);
  return {mean, ss / n};
}

// One parameter over the finite trials: its levels, sorted (by value when
// numeric, else as text), and each trial's level (-1 where it is absent).
struct Axis {
  bool numeric = true;
  bool log_scale = false;            // all values > 0 spanning more than two decades: compared as log10
  std::vector<double> level_values;  // numeric levels, as the forest sees them (log10 when log_scale)
  std::vector<int> level;            // per finite trial
  int levels = 0;
};

Axis make_axis(const std::vector<const Trial*>& finite, std::size_t p) {
  Axis axis;
  std::vector<double> values(finite.size());
  bool any = false;
  for (std::size_t i = 0; i < finite.size(); ++i) {
    const auto& text = finite[i]->values[p];
    if (text.empty()) continue;
    any = true;
    const auto v = number(text);
    if (!v) {
      axis.numeric = false;
      break;
    }
    values[i] = *v;
  }
  axis.numeric = axis.numeric && any;
  axis.level.assign(finite.size(), -1);
  if (axis.numeric) {
    std::vector<double> distinct;
    for (std::size_t i = 0; i < finite.size(); ++i)
      if (!finite[i]->values[p].empty()) distinct.push_back(values[i]);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (std::size_t i = 0; i < finite.size(); ++i)
      if (!finite[i]->values[p].empty())
        axis.level[i] =
            static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), values[i]) - distinct.begin());
    axis.log_scale = distinct.front() > 0 && distinct.back() > 100 * distinct.front();
    for (double v : distinct) axis.level_values.push_back(axis.log_scale ? std::log10(v) : v);
    axis.levels = static_cast<int>(distinct.size());
  } else {
    std::set<std::string> distinct;
    for (const auto* t : finite)
      if (!t->values[p].empty()) distinct.insert(t->values[p]);
    const std::vector<std::string> sorted(distinct.begin(), distinct.end());
    for (std::size_t i = 0; i < finite.size(); ++i)
      if (!finite[i]->values[p].empty())
        axis.level[i] =
            static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), finite[i]->values[p]) - sorted.begin());
    axis.levels = static_cast<int>(sorted.size());
  }
  return axis;
}

// A group's variance split into fractions that sum to 1.
struct Fractions {
  std::vector<double> param;  // indexed like params
  double interactions = 0;
  double noise = 0;
  bool interactions_possible = false;
  bool noise_possible = false;
};

// The trials of one group, restricted to the parameters that vary in it:
// each trial's level of each such parameter, renumbered 0..L-1 within the
// group so that levels absent from the group take no room.
struct GroupData {
  std::vector<std::size_t> params;      // indices into params / axes
  std::vector<int> levels;              // per varying parameter, levels within the group
  std::vector<bool> categorical;        // per varying parameter
  std::vector<std::vector<int>> level;  // [trial][varying parameter]
  std::vector<std::vector<double>> x;   // [trial][varying parameter]: the forest's feature
  std::vector<double> y;
};

GroupData make_group_data(const std::vector<Axis>& axes, const std::vector<std::size_t>& members,
                          const std::vector<double>& objective) {
  GroupData g;
  for (std::size_t i : members) g.y.push_back(objective[i]);
  std::vector<std::vector<int>> local(axes.size());  // global level -> level within the group
  for (std::size_t p = 0; p < axes.size(); ++p) {
    std::vector<int> present(static_cast<std::size_t>(axes[p].levels), 0);
    for (std::size_t i : members)
      if (axes[p].level[i] >= 0) present[static_cast<std::size_t>(axes[p].level[i])] = 1;
    int count = 0;
    local[p].assign(present.size(), -1);
    for (std::size_t l = 0; l < present.size(); ++l)
      if (present[l]) local[p][l] = count++;
    if (count > 1) {
      g.params.push_back(p);
      g.levels.push_back(count);
      g.categorical.push_back(!axes[p].numeric);
    }
  }
  for (std::size_t i : members) {
    std::vector<int> levels;
    std::vector<double> x;
    for (std::size_t k = 0; k < g.params.size(); ++k) {
      const Axis& axis = axes[g.params[k]];
      const int global = axis.level[i];
      const int l = local[g.params[k]][static_cast<std::size_t>(global)];
      levels.push_back(l);
      // A categorical's feature is its level's index, so that each level
      // gets a unit of the domain [-0.5, L-0.5].
      x.push_back(axis.numeric ? axis.level_values[static_cast<std::size_t>(global)] : static_cast<double>(l));
    }
    g.level.push_back(std::move(levels));
    g.x.push_back(std::move(x));
  }
  return g;
}

// Exact functional ANOVA of a complete grid, every cell weighted equally;
// std::nullopt when some combination of levels was never run.
std::optional<Fractions> grid_anova(const GroupData& g, std::size_t n_params) {
  const std::size_t k = g.params.size();
  std::size_t combinations = 1;
  for (int l : g.levels) {
    combinations *= static_cast<std::size_t>(l);
    if (combinations > g.y.size()) return std::nullopt;  // more cells than trials: cannot all be there
  }
  std::map<std::vector<int>, std::vector<double>> cells;
  for (std::size_t i = 0; i < g.y.size(); ++i) cells[g.level[i]].push_back(g.y[i]);
  if (cells.size() != combinations) return std::nullopt;

  Fractions f;
  f.param.assign(n_params, 0);
  f.interactions_possible = k >= 2;
  std::vector<std::pair<const std::vector<int>*, double>> means;  // cell -> mean
  double noise = 0;
  for (const auto& [levels, ys] : cells) {
    const auto [mean, variance] = mean_variance(ys);
    means.emplace_back(&levels, mean);
    noise += variance;
    f.noise_possible = f.noise_possible || ys.size() > 1;
  }
  const double n_cells = static_cast<double>(cells.size());
  noise /= n_cells;
  double grand = 0;
  for (const auto& m : means) grand += m.second;
  grand /= n_cells;
  double v_cells = 0;
  for (const auto& m : means) v_cells += (m.second - grand) * (m.second - grand);
  v_cells /= n_cells;
  const double denominator = v_cells + noise;
  if (!(denominator > 0)) return std::nullopt;

  double mains = 0;
  for (std::size_t j = 0; j < k; ++j) {
    std::vector<double> level_sum(static_cast<std::size_t>(g.levels[j]), 0);
    for (const auto& [levels, mean] : means) level_sum[static_cast<std::size_t>((*levels)[j])] += mean;
    const double cells_per_level = n_cells / g.levels[j];  // the grid is complete: the same for every level
    double v = 0;
    for (double sum : level_sum) v += (sum / cells_per_level - grand) * (sum / cells_per_level - grand);
    v /= g.levels[j];
    mains += v;
    f.param[g.params[j]] = v / denominator;
  }
  f.interactions = std::max(0.0, v_cells - mains) / denominator;
  f.noise = noise / denominator;
  return f;
}

// A regression tree's leaves: boxes of the feature space with their values.
struct Leaf {
  std::vector<double> lo, hi;
  double value = 0;
};

constexpr int kMaxDepth = 64;

// Grows a CART regression tree as scikit-learn's RandomForestRegressor does
// under Optuna's fANOVA settings (every feature considered, in a random order
// so that ties go to a random one; min_samples_split 2, min_samples_leaf 1;
// thresholds midway between consecutive distinct values; squared error).
void grow(const GroupData& g, std::vector<std::size_t>& rows, std::size_t begin, std::size_t end,
          std::vector<double> lo, std::vector<double> hi, int depth, Draw& draw, std::vector<Leaf>& leaves) {
  const std::size_t n = end - begin;
  double mean = 0, y_min = g.y[rows[begin]], y_max = y_min;
  for (std::size_t r = begin; r < end; ++r) {
    mean += g.y[rows[r]];
    y_min = std::min(y_min, g.y[rows[r]]);
    y_max = std::max(y_max, g.y[rows[r]]);
  }
  mean /= static_cast<double>(n);
  const auto leaf = [&] { leaves.push_back({std::move(lo), std::move(hi), mean}); };
  if (n < 2 || depth >= kMaxDepth || y_min == y_max) return leaf();

  const std::size_t k = g.params.size();
  std::vector<std::size_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = k; i > 1; --i) std::swap(order[i - 1], order[draw.index(i)]);

  // Minimising the children's squared error is maximising sum_l^2/n_l + sum_r^2/n_r
  // of the centred objective.
  double best = -1;
  std::size_t best_feature = 0;
  double best_threshold = 0;
  std::vector<std::size_t> sorted(rows.begin() + static_cast<std::ptrdiff_t>(begin),
                                  rows.begin() + static_cast<std::ptrdiff_t>(end));
  for (std::size_t feature : order) {
    std::sort(sorted.begin(), sorted.end(),
              [&](std::size_t a, std::size_t b) { return g.x[a][feature] < g.x[b][feature]; });
    double total = 0;
    for (std::size_t row : sorted) total += g.y[row] - mean;
    double left = 0;
    for (std::size_t i = 1; i < n; ++i) {
      left += g.y[sorted[i - 1]] - mean;
      const double a = g.x[sorted[i - 1]][feature], b = g.x[sorted[i]][feature];
      if (!(a < b)) continue;
      const double nl = static_cast<double>(i), nr = static_cast<double>(n - i);
      const double proxy = left * left / nl + (total - left) * (total - left) / nr;
      if (proxy > best) {
        best = proxy;
        best_feature = feature;
        best_threshold = a + (b - a) / 2;
        if (!(best_threshold < b)) best_threshold = a;  // a and b adjacent doubles
      }
    }
  }
  if (best < 0) return leaf();  // every feature constant here

  const auto middle = std::stable_partition(rows.begin() + static_cast<std::ptrdiff_t>(begin),
                                            rows.begin() + static_cast<std::ptrdiff_t>(end),
                                            [&](std::size_t row) { return g.x[row][best_feature] <= best_threshold; });
  const std::size_t split = static_cast<std::size_t>(middle - rows.begin());
  std::vector<double> left_hi = hi, right_lo = lo;
  left_hi[best_feature] = best_threshold;
  right_lo[best_feature] = best_threshold;
  grow(g, rows, begin, split, std::move(lo), std::move(left_hi), depth + 1, draw, leaves);
  grow(g, rows, split, end, std::move(right_lo), std::move(hi), depth + 1, draw, leaves);
}

// One tree's main-effect fractions V_i / V_tree under the uniform measure on
// the domain; std::nullopt when the tree is constant.
std::optional<std::vector<double>> tree_fractions(const std::vector<Leaf>& leaves, const std::vector<double>& dom_lo,
                                                  const std::vector<double>& dom_hi) {
  const std::size_t k = dom_lo.size();
  const auto [lowest, highest] =
      std::minmax_element(leaves.begin(), leaves.end(), [](const Leaf& a, const Leaf& b) { return a.value < b.value; });
  if (lowest->value == highest->value) return std::nullopt;

  // frac[l][j]: leaf l's length on axis j over the domain's.
  std::vector<std::vector<double>> frac(leaves.size(), std::vector<double>(k));
  std::vector<double> weight(leaves.size(), 1);
  for (std::size_t l = 0; l < leaves.size(); ++l)
    for (std::size_t j = 0; j < k; ++j) {
      frac[l][j] = (leaves[l].hi[j] - leaves[l].lo[j]) / (dom_hi[j] - dom_lo[j]);
      weight[l] *= frac[l][j];
    }
  double mean = 0;
  for (std::size_t l = 0; l < leaves.size(); ++l) mean += weight[l] * leaves[l].value;
  double variance = 0;
  for (std::size_t l = 0; l < leaves.size(); ++l)
    variance += weight[l] * (leaves[l].value - mean) * (leaves[l].value - mean);
  if (!(variance > 0)) return std::nullopt;

  std::vector<double> out(k, 0);
  for (std::size_t i = 0; i < k; ++i) {
    // The marginal along axis i is constant between consecutive leaf boundaries.
    std::vector<double> cuts;
    for (const Leaf& leaf : leaves) {
      cuts.push_back(leaf.lo[i]);
      cuts.push_back(leaf.hi[i]);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<double> delta(cuts.size(), 0);  // difference array over the intervals
    for (std::size_t l = 0; l < leaves.size(); ++l) {
      double others = 1;
      for (std::size_t j = 0; j < k; ++j)
        if (j != i) others *= frac[l][j];
      const auto first = std::lower_bound(cuts.begin(), cuts.end(), leaves[l].lo[i]) - cuts.begin();
      const auto last = std::lower_bound(cuts.begin(), cuts.end(), leaves[l].hi[i]) - cuts.begin();
      delta[static_cast<std::size_t>(first)] += leaves[l].value * others;
      delta[static_cast<std::size_t>(last)] -= leaves[l].value * others;
    }
    double marginal = 0, v = 0;
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      marginal += delta[c];
      v += (cuts[c + 1] - cuts[c]) / (dom_hi[i] - dom_lo[i]) * (marginal - mean) * (marginal - mean);
    }
    out[i] = v / variance;
  }
  return out;
}

// fANOVA on a random forest (Hutter et al. 2014, as Optuna computes it):
// per tree, each feature's main-effect variance over the tree's variance,
// averaged over the trees; what the main effects leave is interactions.
Fractions forest_anova(const GroupData& g, std::size_t n_params, std::uint64_t seed) {
  const std::size_t k = g.params.size(), n = g.y.size();
  // The domain: a numeric parameter's observed range; a categorical's
  // [-0.5, L-0.5], a unit per level, so the uniform measure weighs levels equally.
  std::vector<double> dom_lo(k), dom_hi(k);
  for (std::size_t j = 0; j < k; ++j) {
    if (g.categorical[j]) {
      dom_lo[j] = -0.5;
      dom_hi[j] = g.levels[j] - 0.5;
      continue;
    }
    dom_lo[j] = dom_hi[j] = g.x[0][j];
    for (const auto& row : g.x) {
      dom_lo[j] = std::min(dom_lo[j], row[j]);
      dom_hi[j] = std::max(dom_hi[j], row[j]);
    }
  }

  Fractions f;
  f.param.assign(n_params, 0);
  f.interactions_possible = k >= 2;
  Draw draw(seed);
  std::vector<double> sum(k, 0);
  int trees = 0;
  for (int t = 0; t < kForestTrees; ++t) {
    std::vector<std::size_t> rows(n);
    for (auto& row : rows) row = draw.index(n);  // a bootstrap sample
    std::vector<Leaf> leaves;
    grow(g, rows, 0, n, dom_lo, dom_hi, 0, draw, leaves);
    if (const auto fractions = tree_fractions(leaves, dom_lo, dom_hi)) {
      for (std::size_t j = 0; j < k; ++j) sum[j] += (*fractions)[j];
      ++trees;
    }
  }
  if (trees == 0) {
    // Every bootstrap sample happened to hold one objective value: no tree
    // says which parameter matters, so none is credited.
    f.interactions = 1;
    return f;
  }
  double mains = 0;
  for (std::size_t j = 0; j < k; ++j) {
    sum[j] /= trees;
    mains += sum[j];
  }
  const double scale = mains > 1 ? 1 / mains : 1.0;  // main effects exceed the whole only by rounding
  for (std::size_t j = 0; j < k; ++j) f.param[g.params[j]] = sum[j] * scale;
  f.interactions = std::max(0.0, 1 - mains);
  return f;
}

std::string share_percent(double share) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out.precision(share >= 0.1 ? 0 : 1);
  out << std::fixed << 100 * share << "%";
  return out.str();
}

}  // namespace

ImportanceResult parameter_importance(const std::vector<std::string>& params, const std::vector<Trial>& trials) {
  std::vector<const Trial*> finite;
  for (const auto& t : trials) {
    if (t.values.size() != params.size())
      throw std::invalid_argument("a trial has " + std::to_string(t.values.size()) + " values for " +
                                  std::to_string(params.size()) + " parameters");
    if (std::isfinite(t.objective)) finite.push_back(&t);
  }
  ImportanceResult result;
  if (finite.size() < 3) {
    result.method = "Needs 3 or more trials with a finite objective; there are " + std::to_string(finite.size()) + ".";
    return result;
  }
  std::vector<double> objective;
  for (const auto* t : finite) objective.push_back(t->objective);
  if (std::all_of(objective.begin(), objective.end(), [&](double y) { return y == objective.front(); })) {
    result.method = "The objective is the same in every trial: there is no variance to split.";
    return result;
  }

  std::vector<Axis> axes;
  for (std::size_t p = 0; p < params.size(); ++p) axes.push_back(make_axis(finite, p));

  // Trials grouped by which parameters they have.
  std::map<std::vector<bool>, std::vector<std::size_t>> by_signature;
  for (std::size_t i = 0; i < finite.size(); ++i) {
    std::vector<bool> signature;
    for (const auto& value : finite[i]->values) signature.push_back(!value.empty());
    by_signature[signature].push_back(i);
  }
  std::vector<std::vector<std::size_t>> groups;
  for (auto& entry : by_signature) groups.push_back(std::move(entry.second));

  // Law of total variance: N Var = sum_g N_g (mu_g - mu)^2 + sum_g N_g Var_g.
  // The total is taken as that sum, so the parts add up to it exactly.
  const double n = static_cast<double>(finite.size());
  const double mu = mean_variance(objective).first;
  double between = 0, within = 0;
  std::vector<double> group_variance;
  for (const auto& members : groups) {
    std::vector<double> ys;
    for (std::size_t i : members) ys.push_back(objective[i]);
    const auto [mean, variance] = mean_variance(ys);
    between += static_cast<double>(ys.size()) / n * (mean - mu) * (mean - mu);
    within += static_cast<double>(ys.size()) / n * variance;
    group_variance.push_back(variance);
  }
  const double total = between + within;
  if (!(total > 0)) {
    result.method = "The objective's variance is too small to split.";
    return result;
  }

  std::vector<double> share(params.size(), 0);
  double interactions = 0, noise = 0;
  bool interactions_possible = false, noise_possible = false;

  // The between-group part is the choice of hook (or whichever section's
  // implementation): credited to the first `.name` axis whose values differ
  // between the groups, else to the first parameter some groups lack.
  std::optional<std::size_t> between_param;
  if (groups.size() > 1) {
    for (std::size_t p = 0; p < params.size() && !between_param; ++p) {
      if (!is_name_axis(params[p])) continue;
      std::set<std::set<int>> value_sets;
      for (const auto& members : groups) {
        std::set<int> values;
        for (std::size_t i : members) values.insert(axes[p].level[i]);
        value_sets.insert(values);
      }
      if (value_sets.size() > 1) between_param = p;
    }
    for (std::size_t p = 0; p < params.size() && !between_param; ++p) {
      const bool first_has = !finite[groups.front().front()]->values[p].empty();
      for (const auto& members : groups)
        if (!finite[members.front()]->values[p].empty() != first_has) between_param = p;
    }
    share[*between_param] += between / total;
  }

  int exact_groups = 0, forest_groups = 0;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    if (!(group_variance[gi] > 0)) continue;
    const double weight = static_cast<double>(groups[gi].size()) / n * group_variance[gi] / total;
    const GroupData data = make_group_data(axes, groups[gi], objective);
    auto fractions = grid_anova(data, params.size());
    if (fractions) {
      ++exact_groups;
    } else {
      fractions = forest_anova(data, params.size(), 0x636f6d6d74756e65ULL + gi);  // "commtune"
      ++forest_groups;
    }
    for (std::size_t p = 0; p < params.size(); ++p) share[p] += weight * fractions->param[p];
    interactions += weight * fractions->interactions;
    noise += weight * fractions->noise;
    interactions_possible = interactions_possible || fractions->interactions_possible;
    noise_possible = noise_possible || fractions->noise_possible;
  }

  for (std::size_t p = 0; p < params.size(); ++p) {
    Importance entry;
    entry.param = params[p];
    entry.share = share[p];
    entry.groups = axes[p].levels;
    result.shares.push_back(entry);
  }
  std::stable_sort(result.shares.begin(), result.shares.end(),
                   [](const Importance& a, const Importance& b) { return a.share > b.share; });
  if (interactions_possible || interactions > 0)
    result.shares.push_back({kInteractions, interactions, 0, Importance::Kind::Interactions});
  if (noise_possible || noise > 0) result.shares.push_back({kNoise, noise, 0, Importance::Kind::Noise});
  // The parts sum to 1 up to rounding (and the clamping of a rounding-negative
  // interaction term); take out that last bit.
  double sum = 0;
  for (const auto& entry : result.shares) sum += entry.share;
  for (auto& entry : result.shares) entry.share = std::clamp(entry.share / sum, 0.0, 1.0);

  const std::string forest = "random forest of " + std::to_string(kForestTrees) + " trees";
  std::string decomposition;
  if (exact_groups && !forest_groups)
    decomposition = "exact functional ANOVA of the grid";
  else if (forest_groups && !exact_groups)
    decomposition = "fANOVA on a " + forest + " (the trials do not form a complete grid)";
  else if (exact_groups && forest_groups)
    decomposition = "exact functional ANOVA where a group's trials form a complete grid and fANOVA on a " + forest +
                    " where they do not";
  if (groups.size() == 1) {
    result.method = "Variance split by " + decomposition + ".";
  } else {
    const std::string split = "the trials fall into " + std::to_string(groups.size()) +
                              " groups by which parameters they have; the variance between groups (" +
                              share_percent(between / total) + ") is credited to " + params[*between_param];
    result.method = decomposition.empty()
                        ? "All variance lies between groups: " + split + "."
                        : "Variance split by " + decomposition + ": " + split +
                              ", and each group's own variance is split over the parameters that vary in it.";
  }
  return result;
}

}  // namespace commtune

#include "core/tuner/sweep/tpe_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "core/tuner/sweep/draw.h"

namespace commtune {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPriorWeight = 1.0;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// a dominates b: no worse in every objective, better in one.
bool dominates(const std::vector<double>& a, const std::vector<double>& b) {
  bool better = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] > b[i]) return false;
    better = better || a[i] < b[i];
  }
  return better;
}

// Hypervolume (minimisation) of two-objective points up to `reference`.
double hypervolume_2d(std::vector<std::vector<double>> points, const std::vector<double>& reference) {
  std::sort(points.begin(), points.end());
  double volume = 0, lowest = reference[1];
  for (const auto& p : points) {
    if (!(p[0] < reference[0]) || !(p[1] < lowest)) continue;
    volume += (reference[0] - p[0]) * (lowest - p[1]);
    lowest = p[1];
  }
  return volume;
}

// `count` of `front` (indices into history) chosen greedily by the
// hypervolume each adds to those chosen before.
std::vector<std::size_t> cut_by_hypervolume(const std::vector<TpeObservation>& history,
                                            std::vector<std::size_t> front, std::size_t count) {
  if (history[front.front()].values.size() != 2) {
    front.resize(count);  // the schema allows at most two objectives; keep trial order otherwise
    return front;
  }
  std::vector<double> reference(2, 0.0);
  for (int d = 0; d < 2; ++d) {
    double worst = -kInf;
    for (auto i : front)
      if (std::isfinite(history[i].values[d])) worst = std::max(worst, history[i].values[d]);
    if (!std::isfinite(worst)) worst = 0;
    reference[d] = worst + std::max(std::abs(worst) * 0.1, 1e-12);
  }
  std::vector<std::size_t> chosen;
  std::vector<std::vector<double>> chosen_points;
  while (chosen.size() < count) {
    const double base = hypervolume_2d(chosen_points, reference);
    std::size_t best = 0;
    double best_gain = -1;
    for (std::size_t k = 0; k < front.size(); ++k) {
      auto with = chosen_points;
      with.push_back(history[front[k]].values);
      const double gain = hypervolume_2d(with, reference) - base;
      if (gain > best_gain) best_gain = gain, best = k;
    }
    chosen.push_back(front[best]);
    chosen_points.push_back(history[front[best]].values);
    front.erase(front.begin() + static_cast<std::ptrdiff_t>(best));
  }
  return chosen;
}

// Optuna's default_weights: equal up to 25 trials, then the older ones ramp down.
std::vector<double> trial_weights(std::size_t n) {
  std::vector<double> w(n, 1.0);
  if (n > 25) {
    const std::size_t ramp = n - 25;
    for (std::size_t i = 0; i < ramp; ++i)
      w[i] = ramp == 1 ? 1.0 / static_cast<double>(n)
                       : 1.0 / static_cast<double>(n) +
                             (1.0 - 1.0 / static_cast<double>(n)) * static_cast<double>(i) / static_cast<double>(ramp - 1);
  }
  return w;
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double log_sum_exp(const std::vector<double>& terms) {
  const double top = *std::max_element(terms.begin(), terms.end());
  if (!std::isfinite(top)) return top;
  double sum = 0;
  for (double t : terms) sum += std::exp(t - top);
  return top + std::log(sum);
}

// One side's density of one parameter.
class ParzenEstimator {
 public:
  // `xs` in trial order; `choices` as TpeDimension's.
  ParzenEstimator(const std::vector<double>& xs, std::size_t choices) : choices_(choices) {
    const auto w = trial_weights(xs.size());
    if (choices_ > 0) {
      probability_.assign(choices_, kPriorWeight / static_cast<double>(choices_));
      for (std::size_t i = 0; i < xs.size(); ++i) probability_[static_cast<std::size_t>(xs[i])] += w[i];
      const double total = std::accumulate(probability_.begin(), probability_.end(), 0.0);
      for (auto& p : probability_) p /= total;
      return;
    }
    mu_ = xs;
    mu_.push_back(0.5);  // the prior: the whole range
    weight_ = w;
    weight_.push_back(kPriorWeight);
    const double total = std::accumulate(weight_.begin(), weight_.end(), 0.0);
    for (auto& x : weight_) x /= total;

    const std::size_t m = mu_.size();
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return mu_[a] < mu_[b]; });
    std::vector<double> edges{0.0};
    for (auto k : order) edges.push_back(mu_[k]);
    edges.push_back(1.0);
    sigma_.assign(m, 1.0);
    for (std::size_t s = 0; s < m; ++s) {
      double width = std::max(edges[s + 1] - edges[s], edges[s + 2] - edges[s + 1]);
      // The range's ends are not neighbours of the outermost points.
      if (m >= 2 && s == 0) width = edges[2] - edges[1];
      if (m >= 2 && s + 1 == m) width = edges[m] - edges[m - 1];
      sigma_[order[s]] = std::clamp(width, 1.0 / std::min(100.0, 1.0 + static_cast<double>(m)), 1.0);
    }
    sigma_.back() = 1.0;
  }

  double sample(Draw& draw) const {
    if (choices_ > 0) return static_cast<double>(pick(probability_, draw));
    const auto k = pick(weight_, draw);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const double x = mu_[k] + sigma_[k] * draw.normal();
      if (x >= 0.0 && x <= 1.0) return x;
    }
    return std::clamp(mu_[k], 0.0, 1.0);
  }

  double log_density(double x) const {
    if (choices_ > 0) return std::log(probability_[static_cast<std::size_t>(x)]);
    std::vector<double> terms;
    for (std::size_t k = 0; k < mu_.size(); ++k) {
      const double z = (x - mu_[k]) / sigma_[k];
      const double mass = normal_cdf((1.0 - mu_[k]) / sigma_[k]) - normal_cdf((0.0 - mu_[k]) / sigma_[k]);
      terms.push_back(std::log(weight_[k]) - 0.5 * z * z - std::log(sigma_[k] * std::sqrt(2.0 * M_PI)) -
                      std::log(std::max(mass, 1e-300)));
    }
    return log_sum_exp(terms);
  }

 private:
  static std::size_t pick(const std::vector<double>& probabilities, Draw& draw) {
    double u = draw.uniform();
    for (std::size_t k = 0; k + 1 < probabilities.size(); ++k) {
      if (u < probabilities[k]) return k;
      u -= probabilities[k];
    }
    return probabilities.size() - 1;
  }

  std::size_t choices_;
  std::vector<double> probability_;    // categorical
  std::vector<double> mu_, sigma_, weight_;  // numeric
};

double uniform_point(const TpeDimension& dimension, Draw& draw) {
  return dimension.choices > 0 ? static_cast<double>(draw.index(dimension.choices)) : draw.uniform();
}

}  // namespace

std::vector<std::size_t> tpe_good_trials(const std::vector<TpeObservation>& history) {
  const std::size_t n = history.size();
  const auto wanted = std::min<std::size_t>(static_cast<std::size_t>(std::ceil(0.1 * static_cast<double>(n))), 25);
  // Trials that ran further come first: group by rung, furthest first.
  std::map<int, std::vector<std::size_t>, std::greater<>> by_rung;
  for (std::size_t i = 0; i < n; ++i) by_rung[history[i].rung].push_back(i);
  std::vector<std::size_t> good;
  for (auto& [rung, members] : by_rung) {
    while (!members.empty() && good.size() < wanted) {
      // The first non-dominated front of what is left (one objective: the best, ties in trial order).
      std::vector<std::size_t> front, rest;
      for (auto i : members) {
        const bool dominated = std::any_of(members.begin(), members.end(), [&](auto j) {
          return dominates(history[j].values, history[i].values);
        });
        (dominated ? rest : front).push_back(i);
      }
      const std::size_t room = wanted - good.size();
      if (front.size() > room) {
        front = history[front.front()].values.size() == 1
                    ? std::vector<std::size_t>(front.begin(), front.begin() + static_cast<std::ptrdiff_t>(room))
                    : cut_by_hypervolume(history, front, room);
      }
      good.insert(good.end(), front.begin(), front.end());
      std::vector<std::size_t> left;
      for (auto i : members)
        if (std::find(front.begin(), front.end(), i) == front.end()) left.push_back(i);
      members = std::move(left);
    }
  }
  std::sort(good.begin(), good.end());
  return good;
}

std::vector<double> tpe_sample(const std::vector<TpeDimension>& dimensions,
                               const std::vector<TpeObservation>& history, std::int64_t trial,
                               const TpeOptions& options) {
  Draw draw(splitmix64(static_cast<std::uint64_t>(options.seed) ^ splitmix64(static_cast<std::uint64_t>(trial))));
  std::vector<double> point;
  if (static_cast<std::int64_t>(history.size()) < options.startup_trials) {
    for (const auto& d : dimensions) point.push_back(uniform_point(d, draw));
    return point;
  }
  const auto good = tpe_good_trials(history);
  std::vector<bool> is_good(history.size(), false);
  for (auto i : good) is_good[i] = true;
  for (std::size_t d = 0; d < dimensions.size(); ++d) {
    std::vector<double> below, above;
    for (std::size_t i = 0; i < history.size(); ++i) {
      const double x = history[i].position.at(d);
      if (!std::isnan(x)) (is_good[i] ? below : above).push_back(x);
    }
    const ParzenEstimator l(below, dimensions[d].choices), g(above, dimensions[d].choices);
    double best = 0, best_score = -kInf;
    for (std::int64_t c = 0; c < options.candidates; ++c) {
      const double x = l.sample(draw);
      const double score = l.log_density(x) - g.log_density(x);
      if (c == 0 || score > best_score) best = x, best_score = score;
    }
    point.push_back(best);
  }
  return point;
}

}  // namespace commtune

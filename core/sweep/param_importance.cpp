#include "core/sweep/param_importance.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>

namespace commtune {

namespace {

bool as_number(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end && *end == '\0' && std::isfinite(value);
}

// A group per trial: its value, or for a number with more distinct values
// than kMaxGroups its quantile bin (so a continuous axis is not "explained"
// by giving every trial a group of its own).
std::vector<int> groups_of(const std::vector<std::string>& values) {
  std::vector<double> numbers(values.size());
  bool numeric = true;
  for (std::size_t i = 0; i < values.size() && numeric; ++i) numeric = as_number(values[i], numbers[i]);
  std::map<std::string, int> distinct;
  for (const auto& v : values) distinct.emplace(v, static_cast<int>(distinct.size()));
  std::vector<int> out(values.size());
  if (!numeric || static_cast<int>(distinct.size()) <= kMaxGroups) {
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = distinct.at(values[i]);
    return out;
  }
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return numbers[a] < numbers[b]; });
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    int bin = static_cast<int>(rank * kMaxGroups / order.size());
    // Equal values share a bin.
    if (rank > 0 && numbers[order[rank]] == numbers[order[rank - 1]]) bin = out[order[rank - 1]];
    out[order[rank]] = bin;
  }
  return out;
}

}  // namespace

std::vector<Importance> parameter_importance(const std::vector<std::string>& params, const std::vector<Trial>& trials) {
  std::vector<const Trial*> finite;
  for (const auto& t : trials) {
    if (t.values.size() != params.size())
      throw std::invalid_argument("a trial has " + std::to_string(t.values.size()) + " values for " +
                                  std::to_string(params.size()) + " parameters");
    if (std::isfinite(t.objective)) finite.push_back(&t);
  }
  if (finite.size() < 3) return {};
  double mean = 0;
  for (const auto* t : finite) mean += t->objective;
  mean /= static_cast<double>(finite.size());
  double total = 0;
  for (const auto* t : finite) total += (t->objective - mean) * (t->objective - mean);

  std::vector<Importance> out;
  for (std::size_t p = 0; p < params.size(); ++p) {
    std::vector<std::string> values;
    for (const auto* t : finite) values.push_back(t->values[p]);
    const auto groups = groups_of(values);
    std::map<int, std::pair<double, int>> sums;  // group -> (sum, count)
    for (std::size_t i = 0; i < finite.size(); ++i) {
      auto& [sum, count] = sums[groups[i]];
      sum += finite[i]->objective;
      ++count;
    }
    double between = 0;
    for (const auto& [group, sum_count] : sums) {
      const double group_mean = sum_count.first / sum_count.second;
      between += sum_count.second * (group_mean - mean) * (group_mean - mean);
    }
    out.push_back({params[p], total > 0 ? std::clamp(between / total, 0.0, 1.0) : 0.0,
                   static_cast<int>(sums.size())});
  }
  std::stable_sort(out.begin(), out.end(), [](const Importance& a, const Importance& b) { return a.share > b.share; });
  return out;
}

}  // namespace commtune

#include "core/tuner/verdict/pareto.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace commtune {

std::vector<ParetoPoint> pareto_order(std::vector<TradeOff> points) {
  points.erase(std::remove_if(points.begin(), points.end(),
                              [](const TradeOff& p) { return !std::isfinite(p.cost) || !std::isfinite(p.loss); }),
               points.end());
  std::sort(points.begin(), points.end(), [](const TradeOff& a, const TradeOff& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.loss != b.loss) return a.loss < b.loss;
    return a.run_id < b.run_id;
  });
  std::vector<ParetoPoint> out;
  out.reserve(points.size());
  double best = std::numeric_limits<double>::infinity();
  for (const auto& p : points) {
    const bool on_front = p.loss < best;  // nothing cheaper reaches this loss
    if (on_front) best = p.loss;
    out.push_back({p, on_front});
  }
  return out;
}

std::vector<std::int64_t> pareto_front(const std::vector<ParetoPoint>& ordered) {
  std::vector<std::int64_t> out;
  for (const auto& p : ordered)
    if (p.on_front) out.push_back(p.point.run_id);
  return out;
}

}  // namespace commtune

#include "core/store/run_metrics.h"

#include <algorithm>
#include <cmath>

namespace commtune {

std::int64_t tail_window(std::int64_t steps) { return std::clamp<std::int64_t>(steps / 10, 1, 50); }

std::optional<double> tail_loss(const std::vector<db::CurvePoint>& curve, std::optional<std::int64_t> step) {
  if (curve.empty()) return std::nullopt;
  const std::int64_t last = step ? *step - 1 : curve.back().step;  // `step` steps done: the last index is step - 1
  const std::int64_t first = last + 1 - tail_window(last + 1);
  double sum = 0;
  std::int64_t n = 0;
  for (const auto& p : curve) {
    if (p.step < first || p.step > last) continue;
    sum += p.loss;
    ++n;
  }
  if (n == 0) return std::nullopt;
  const double mean = sum / static_cast<double>(n);
  return std::isfinite(mean) ? std::optional<double>(mean) : std::optional<double>(INFINITY);
}

}  // namespace commtune

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

RunDigest digest_run(const db::Store& store, std::int64_t run_id) {
  RunDigest d;
  const auto curve = store.curve(run_id);
  if (curve.empty()) return d;
  d.steps = curve.back().step + 1;
  d.loss = tail_loss(curve);
  const std::size_t steady = curve.size() / 2;
  std::vector<double> times;
  double wire = 0, uncompressed = 0;
  for (std::size_t i = steady; i < curve.size(); ++i) {
    times.push_back(curve[i].t_step);
    wire += curve[i].wire_bytes;
    uncompressed += curve[i].uncompressed_bytes;
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  d.step_ms = 1e3 * times[times.size() / 2];
  d.wire_mb = wire / static_cast<double>(times.size()) / 1e6;
  if (wire > 0) d.compression_ratio = uncompressed / wire;
  return d;
}

}  // namespace commtune

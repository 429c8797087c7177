#include "core/tuner/store/run_metrics.h"

#include <algorithm>
#include <cmath>

namespace commtune {

std::string nonfinite_name(double value) {
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

nlohmann::json figure_json(const std::optional<double>& value) {
  if (!value) return nullptr;
  if (!std::isfinite(*value)) return nonfinite_name(*value);
  return *value;
}

std::optional<double> figure_from_json(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const auto& text = value.get_ref<const std::string&>();
  if (text == "nan") return NAN;
  if (text == "inf") return INFINITY;
  if (text == "-inf") return -INFINITY;
  return std::nullopt;
}

std::size_t first_steady_index(std::size_t count) { return count / 2; }

double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  const auto mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2) return values[mid];
  return 0.5 * (values[mid] + *std::max_element(values.begin(), values.begin() + mid));
}

std::int64_t tail_window(std::int64_t steps) { return std::clamp<std::int64_t>(steps / 10, 1, 50); }

std::optional<double> tail_loss(const std::vector<db::CurvePoint>& curve, std::optional<std::int64_t> step) {
  if (curve.empty()) return std::nullopt;
  const std::int64_t last = step ? *step - 1 : curve.back().step;  // `step` steps done: the last index is step - 1
  const std::int64_t first = last + 1 - tail_window(last + 1);
  double sum = 0;
  std::int64_t n = 0;
  for (const auto& p : curve) {
    if (p.step < first || p.step > last) continue;
    if (!p.loss) return std::nullopt;  // a step in the window has no loss: the mean of the rest is not this figure
    sum += *p.loss;
    ++n;
  }
  if (n == 0) return std::nullopt;
  const double mean = sum / static_cast<double>(n);
  return std::isfinite(mean) ? std::optional<double>(mean) : std::optional<double>(INFINITY);
}

RunDigest digest_curve(const std::vector<db::CurvePoint>& curve) {
  RunDigest d;
  if (curve.empty()) return d;
  d.steps = curve.back().step + 1;
  d.last_loss = curve.back().loss;
  d.loss = tail_loss(curve);
  // Each figure over the steady steps, missing when a step lacks its part.
  std::vector<double> times;
  double wire = 0, uncompressed = 0;
  bool timed = true, counted = true;
  for (std::size_t i = first_steady_index(curve.size()); i < curve.size(); ++i) {
    const auto& p = curve[i];
    timed = timed && p.t_step;
    counted = counted && p.wire_bytes && p.uncompressed_bytes;
    if (timed) times.push_back(*p.t_step);
    if (counted) wire += *p.wire_bytes, uncompressed += *p.uncompressed_bytes;
  }
  if (timed) d.step_ms = 1e3 * median(times);
  if (counted) {
    d.wire_mb = wire / static_cast<double>(curve.size() - first_steady_index(curve.size())) / 1e6;
    if (wire > 0) d.compression_ratio = uncompressed / wire;
  }
  return d;
}

const std::vector<std::string>& measured_statuses() {
  static const std::vector<std::string> statuses{db::status::kSucceeded, db::status::kStopped, db::status::kPaused,
                                                 db::status::kDiverged};
  return statuses;
}

bool is_measured(const std::string& status) {
  const auto& all = measured_statuses();
  return std::find(all.begin(), all.end(), status) != all.end();
}

std::optional<RunDigest> stored_digest(const db::RunRecord& run) {
  if (!db::status::is_end(run.status)) return std::nullopt;
  return digest_from_json(run.digest);
}

RunDigest digest_run(const db::Store& store, const db::RunRecord& run) {
  if (auto stored = stored_digest(run)) return *stored;
  return digest_curve(store.curve(run.id));
}

RunDigest digest_run(const db::Store& store, std::int64_t run_id) {
  const auto run = store.run(run_id);
  return run ? digest_run(store, *run) : RunDigest{};
}

nlohmann::json digest_json(const RunDigest& d) {
  return {{"last_loss", figure_json(d.last_loss)},
          {"tail_loss", figure_json(d.loss)},
          {"step_ms", figure_json(d.step_ms)},
          {"wire_mb_per_step", figure_json(d.wire_mb)},
          {"compression_ratio", figure_json(d.compression_ratio)},
          {"steps", d.steps}};
}

std::optional<RunDigest> digest_from_json(const nlohmann::json& json) {
  if (!json.is_object()) return std::nullopt;
  bool whole = true;
  // A measure (a time, bytes, a ratio) is a number of at least 0; a loss is any figure.
  const auto figure = [&](const char* key, bool measure) -> std::optional<double> {
    const auto at = json.find(key);
    if (at == json.end()) {
      whole = false;
      return std::nullopt;
    }
    const auto value = figure_from_json(*at);
    if ((!value && !at->is_null()) || (value && measure && !(*value >= 0))) whole = false;
    return value;
  };
  RunDigest d;
  d.last_loss = figure("last_loss", false);
  d.loss = figure("tail_loss", false);
  d.step_ms = figure("step_ms", true);
  d.wire_mb = figure("wire_mb_per_step", true);
  d.compression_ratio = figure("compression_ratio", true);
  const auto steps = json.find("steps");
  if (!whole || steps == json.end() || !steps->is_number_integer() || steps->get<std::int64_t>() < 0)
    return std::nullopt;
  d.steps = steps->get<std::int64_t>();
  return d;
}

}  // namespace commtune

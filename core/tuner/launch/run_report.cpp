#include "core/tuner/launch/run_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/tuner/store/run_metrics.h"

namespace commtune {

namespace {

nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB"};
  int u = 0;
  while (bytes >= 1000 && u < 3) {
    bytes /= 1000;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, bytes < 10 ? "%.2f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

}  // namespace

RunSummary::RunSummary(int world_size) : world_size_(world_size), ranks_(world_size) {}

void RunSummary::on_event(const events::Event& event) {
  if (event.rank < 0 || event.rank >= world_size_) return;
  auto& rank = ranks_[event.rank];
  if (const auto* step = event.step()) {
    auto copy = *step;
    copy.bucket_stats.clear();
    for (const auto& s : copy.stats) rank.last_stats[s.name] = s.value;
    rank.steps.push_back(std::move(copy));
    return;
  }
  const auto kind = event.kind();
  if (kind == "run_start" && event.rank == 0) run_start_ = *event.message();
  if (kind == "buckets" && event.rank == 0) buckets_ = event.message()->value("buckets", nlohmann::json::array());
  if (kind == "run_end") rank.end = *event.message();
  if (kind == "checkpoint" && event.rank == 0)
    checkpoints_.push_back(
        {{"step", event.message()->value("step", 0)}, {"folder", event.message()->value("folder", "")}});
}

std::int64_t RunSummary::steps_completed() const {
  std::size_t n = ranks_.empty() ? 0 : ranks_.front().steps.size();
  for (const auto& r : ranks_) n = std::min(n, r.steps.size());
  return static_cast<std::int64_t>(n);
}

std::optional<double> RunSummary::last_loss() const {
  const auto curve = loss_curve();
  if (curve.empty()) return std::nullopt;
  return curve.back();
}

std::vector<double> RunSummary::loss_curve() const {
  const auto n = steps_completed();
  std::vector<double> curve(n, 0.0);
  for (const auto& r : ranks_)
    for (std::int64_t s = 0; s < n; ++s) curve[s] += r.steps[s].loss;
  for (auto& loss : curve) loss /= world_size_;  // as the store averages: the sum, then one division
  return curve;
}

nlohmann::json RunSummary::to_json(const RunOutcome& outcome, const nlohmann::json& config) const {
  nlohmann::json j;
  j["status"] = to_string(outcome.status);
  if (outcome.failed_rank) j["failed_rank"] = *outcome.failed_rank;
  if (!outcome.reason.empty()) j["reason"] = outcome.reason;
  if (const auto n = outcome.nonfinite_json(); !n.is_null()) j["nonfinite"] = n;
  j["world_size"] = world_size_;
  const auto completed = steps_completed();
  const std::int64_t first_step = run_start_.is_null() ? 0 : run_start_.value("first_step", std::int64_t{0});
  j["steps"] = {{"requested", config.value("steps", 0)}, {"completed", first_step + completed}};

  const auto curve = loss_curve();
  if (!curve.empty()) {
    // "final" is the last loss (run_metrics.h), "min" the least finite one.
    double min_loss = NAN;
    for (const double v : curve)
      if (std::isfinite(v) && !(v >= min_loss)) min_loss = v;
    j["loss"] = {{"initial", figure_json(curve.front())}, {"final", figure_json(curve.back())}, {"min", json_number(min_loss)}};
    nlohmann::json per_rank = nlohmann::json::array();
    for (const auto& r : ranks_) per_rank.push_back(figure_json(r.steps[completed - 1].loss));
    j["final_loss_per_rank"] = per_rank;
  }

  const auto steady = static_cast<std::int64_t>(first_steady_index(static_cast<std::size_t>(completed)));
  if (completed > steady) {
    std::vector<double> totals(static_cast<std::size_t>(completed - steady), 0.0);  // per step, mean over ranks
    events::StepTimes sum;
    double wire = 0, uncompressed = 0;
    std::int64_t count = 0;
    for (const auto& r : ranks_) {
      for (std::int64_t s = steady; s < completed; ++s) {
        const auto& rec = r.steps[s];
        totals[static_cast<std::size_t>(s - steady)] += rec.times.total;
        sum.data += rec.times.data;
        sum.forward += rec.times.forward;
        sum.backward += rec.times.backward;
        sum.comm_wait += rec.times.comm_wait;
        sum.hook += rec.times.hook;
        sum.optimizer += rec.times.optimizer;
        sum.total += rec.times.total;
        wire += static_cast<double>(rec.wire_bytes);
        uncompressed += static_cast<double>(rec.uncompressed_bytes);
        ++count;
      }
    }
    for (auto& t : totals) t /= world_size_;
    const double ms = 1e3 / static_cast<double>(count);
    j["step_time_ms"] = {
        {"median", 1e3 * median(totals)}, {"mean", sum.total * ms},          {"data", sum.data * ms},
        {"forward", sum.forward * ms},    {"backward", sum.backward * ms},   {"comm_wait", sum.comm_wait * ms},
        {"hook", sum.hook * ms},          {"optimizer", sum.optimizer * ms}, {"steady_from_step", first_step + steady}};
    j["traffic"] = {{"wire_bytes_per_step", wire / count},
                    {"uncompressed_bytes_per_step", uncompressed / count},
                    {"compression_ratio", wire > 0 ? json_number(uncompressed / wire) : nlohmann::json(nullptr)}};
  }
  if (!ranks_.empty() && !ranks_.front().last_stats.empty()) j["hook_stats"] = ranks_.front().last_stats;
  if (!run_start_.is_null()) {
    j["parameter_count"] = run_start_.value("parameter_count", 0);
    j["device"] = run_start_.value("device", "");
    j["backend"] = run_start_.value("backend", "");
    j["threads_per_rank"] = run_start_.value("threads", 0);
    j["torch_version"] = run_start_.value("torch_version", "");
    j["dataset"] = run_start_.value("dataset", "");
  }
  if (!buckets_.is_null()) j["buckets"] = buckets_;
  if (!checkpoints_.empty()) j["checkpoints"] = checkpoints_;
  if (!run_start_.is_null() && run_start_.value("first_step", 0) > 0) j["resumed_from_step"] = run_start_["first_step"];

  std::vector<std::string> digests;
  for (const auto& r : ranks_)
    if (r.end.contains("param_digest")) digests.push_back(r.end["param_digest"]);
  if (!digests.empty()) {
    j["param_digest"] = digests.front();
    j["ranks_in_sync"] =
        digests.size() == static_cast<std::size_t>(world_size_) &&
        std::all_of(digests.begin(), digests.end(), [&](const auto& d) { return d == digests.front(); });
  }
  j["wall_s"] = outcome.wall_s;
  j["launcher"] = outcome.to_json();
  j["config"] = config;
  return j;
}

ProgressLine::ProgressLine(int world_size, std::int64_t total_steps, std::FILE* out)
    : world_size_(world_size),
      total_steps_(total_steps),
      out_(out),
      terminal_(::isatty(::fileno(out)) != 0),
      started_(std::chrono::steady_clock::now()) {}

void ProgressLine::on_event(const events::Event& event) {
  const auto* step = event.step();
  if (!step) return;
  auto& p = pending_[step->step];
  ++p.ranks;
  // Sums here, one division when the step is whole: the mean over ranks as
  // the store's avg() and the run's summary take it (run_metrics.h).
  p.loss += step->loss;
  p.times.forward += step->times.forward;
  p.times.backward += step->times.backward;
  p.times.comm_wait += step->times.comm_wait;
  p.times.hook += step->times.hook;
  p.times.optimizer += step->times.optimizer;
  p.times.total += step->times.total;
  p.wire += static_cast<double>(step->wire_bytes);
  p.uncompressed += static_cast<double>(step->uncompressed_bytes);
  if (p.ranks < world_size_) return;
  auto done = *pending_.find(step->step);
  pending_.erase(pending_.begin(), std::next(pending_.find(step->step)));
  auto& mean = done.second;
  for (double* figure : {&mean.loss, &mean.times.forward, &mean.times.backward, &mean.times.comm_wait,
                         &mean.times.hook, &mean.times.optimizer, &mean.times.total, &mean.wire, &mean.uncompressed})
    *figure /= world_size_;
  show(done.first, mean);
}

void ProgressLine::show(std::int64_t step, const Pending& p) {
  const auto now = std::chrono::steady_clock::now();
  const bool last = step + 1 == total_steps_;
  if (terminal_) {
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else {
    if (!last && step < next_report_step_) return;
    next_report_step_ = step + std::max<std::int64_t>(1, total_steps_ / 10);
  }
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - started_).count();
  const double eta = elapsed / static_cast<double>(step + 1) * static_cast<double>(total_steps_ - step - 1);
  const double ratio = p.wire > 0 ? p.uncompressed / p.wire : 0;
  std::fprintf(out_,
               "%sstep %lld/%lld | loss %.4f | %.2f ms/step (fwd %.2f bwd %.2f wait %.2f opt %.2f; hook %.2f) | "
               "%s/step x%.2f | ETA %.0fs%s",
               terminal_ ? "\r\033[K" : "", static_cast<long long>(step + 1), static_cast<long long>(total_steps_),
               p.loss, 1e3 * p.times.total, 1e3 * p.times.forward, 1e3 * p.times.backward, 1e3 * p.times.comm_wait,
               1e3 * p.times.optimizer, 1e3 * p.times.hook, human_bytes(p.wire).c_str(), ratio, eta,
               terminal_ ? "" : "\n");
  std::fflush(out_);
  drawn_ = true;
}

void ProgressLine::finish() {
  if (terminal_ && drawn_) std::fputc('\n', out_);
  drawn_ = false;
}

MetricsFile::MetricsFile(const std::string& path) : out_(path) { out_.publish(); }

void MetricsFile::on_event(const events::Event& event) {
  const auto* step = event.step();
  if (!step) return;
  nlohmann::json j{{"rank", event.rank},
                   {"step", step->step},
                   {"loss", json_number(step->loss)},
                   {"lr", step->lr},
                   {"time_data_s", step->times.data},
                   {"time_forward_s", step->times.forward},
                   {"time_backward_s", step->times.backward},
                   {"time_comm_wait_s", step->times.comm_wait},
                   {"time_hook_s", step->times.hook},
                   {"time_optimizer_s", step->times.optimizer},
                   {"time_step_s", step->times.total},
                   {"wire_bytes", step->wire_bytes},
                   {"uncompressed_bytes", step->uncompressed_bytes}};
  if (!step->stats.empty()) {
    auto& stats = j["stats"];
    for (const auto& s : step->stats) stats[s.name] = json_number(s.value);
  }
  if (!step->bucket_stats.empty()) {
    auto& buckets = j["bucket_stats"];
    for (const auto& s : step->bucket_stats)
      buckets.push_back({{"bucket", s.bucket}, {"name", s.name}, {"value", json_number(s.value)}});
  }
  out_.stream() << j.dump() << '\n' << std::flush;  // a reader following the file sees whole lines
}

}  // namespace commtune

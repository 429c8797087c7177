#include "ui/live/live_feed.h"

#include <algorithm>
#include <chrono>

namespace commtune::ui {

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void LiveQueue::push(LivePoint point) {
  std::lock_guard lock(mutex_);
  pending_.points.push_back(point);
}

void LiveQueue::push(BucketStats stats) {
  std::lock_guard lock(mutex_);
  for (auto& b : pending_.buckets)
    if (b.run_id == stats.run_id) {
      b = std::move(stats);
      return;
    }
  pending_.buckets.push_back(std::move(stats));
}

void LiveQueue::push_message(std::int64_t run_id, std::string line) {
  std::lock_guard lock(mutex_);
  pending_.messages.emplace_back(run_id, std::move(line));
}

LiveBatch LiveQueue::take() {
  std::lock_guard lock(mutex_);
  LiveBatch out;
  std::swap(out, pending_);
  return out;
}

LiveFeed::LiveFeed(std::int64_t run_id, std::shared_ptr<LiveQueue> queue)
    : run_id_(run_id), queue_(std::move(queue)), started_ns_(now_ns()) {}

double live_metric(const LivePoint& p, LiveMetric metric) {
  switch (metric) {
    case LiveMetric::Loss:
      return p.loss;
    case LiveMetric::Ratio:
      return p.compression_ratio();
    case LiveMetric::WireMb:
      return p.wire_bytes / 1e6;
    case LiveMetric::ForwardMs:
      return p.forward_s * 1e3;
    case LiveMetric::BackwardMs:
      return p.backward_s * 1e3;
    case LiveMetric::CommWaitMs:
      return p.comm_wait_s * 1e3;
    case LiveMetric::HookMs:
    case LiveMetric::Count:
      break;
  }
  return p.hook_s * 1e3;
}

std::vector<LivePoint> stored_points(std::int64_t run_id, const std::vector<db::StepRow>& rows) {
  std::map<std::int64_t, std::pair<int, LivePoint>> by_step;
  std::map<std::int32_t, bool> ranks;
  for (const auto& r : rows) {
    ranks[r.rank] = true;
    auto& [n, s] = by_step[r.step];
    ++n;
    s.wall_s = std::max(s.wall_s, r.wall_s);
    s.loss += r.loss;
    s.forward_s += r.t_forward;
    s.backward_s += r.t_backward;
    s.comm_wait_s += r.t_comm_wait;
    s.hook_s += r.t_hook;
    s.step_s += r.t_step;
    s.wire_bytes += static_cast<double>(r.wire_bytes);
    s.uncompressed_bytes += static_cast<double>(r.uncompressed_bytes);
  }
  std::vector<LivePoint> out;
  out.reserve(by_step.size());
  const int world = static_cast<int>(ranks.size());
  for (auto& [step, entry] : by_step) {
    auto& [n, s] = entry;
    if (n < world) continue;  // a step some rank never stored (the run stopped mid-step)
    const double d = n;
    out.push_back({run_id, step, s.wall_s, s.loss / d, s.forward_s / d, s.backward_s / d, s.comm_wait_s / d,
                   s.hook_s / d, s.step_s / d, s.wire_bytes / d, s.uncompressed_bytes / d});
  }
  return out;
}

void LiveFeed::on_event(const events::Event& event) {
  if (const auto* hello = std::get_if<events::Hello>(&event.payload)) {
    world_size_ = static_cast<int>(hello->world_size);
    return;
  }
  if (const auto* message = event.message()) {
    const auto kind = event.kind();
    if (kind == "error" || kind == "log") {
      std::string text = message->value("message", message->value("error", message->dump()));
      queue_->push_message(run_id_, "rank " + std::to_string(event.rank) + ": " + text);
    }
    return;
  }
  const auto* record = event.step();
  if (!record) return;
  if (event.rank == 0 && !record->bucket_stats.empty()) {
    BucketStats stats{run_id_, record->step, {}};
    for (const auto& s : record->bucket_stats) stats.values[s.bucket][s.name] = s.value;
    queue_->push(std::move(stats));
  }
  auto& p = partial_[record->step];
  auto& s = p.sum;
  s.loss += record->loss;
  s.forward_s += record->times.forward;
  s.backward_s += record->times.backward;
  s.comm_wait_s += record->times.comm_wait;
  s.hook_s += record->times.hook;
  s.step_s += record->times.total;
  s.wire_bytes += static_cast<double>(record->wire_bytes);
  s.uncompressed_bytes += static_cast<double>(record->uncompressed_bytes);
  if (++p.ranks < world_size_) return;

  const double n = world_size_;
  LivePoint point{run_id_,
                  record->step,
                  static_cast<double>(now_ns() - started_ns_) * 1e-9,
                  s.loss / n,
                  s.forward_s / n,
                  s.backward_s / n,
                  s.comm_wait_s / n,
                  s.hook_s / n,
                  s.step_s / n,
                  s.wire_bytes / n,
                  s.uncompressed_bytes / n};
  partial_.erase(record->step);
  queue_->push(point);
}

}  // namespace commtune::ui

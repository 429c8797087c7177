// Where a running job's events meet the UI. The launcher's thread feeds
// events in (one LiveFeed per run, as an EventSubscriber); it merges the
// ranks' records of each step into one point (means over ranks) and queues
// it. The UI thread takes everything queued once per frame, so it never
// waits on the engine and redraws once however many events arrived. No Qt.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tuner/launch/launcher.h"
#include "db/store.h"

namespace commtune::ui {

// One step of a run, averaged over its ranks.
struct LivePoint {
  std::int64_t run_id = 0;
  std::int64_t step = 0;
  double wall_s = 0;  // since the run (this launch of it) started
  double loss = 0;
  double forward_s = 0, backward_s = 0, comm_wait_s = 0, hook_s = 0, step_s = 0;
  double wire_bytes = 0, uncompressed_bytes = 0;
  double compression_ratio() const { return wire_bytes > 0 ? uncompressed_bytes / wire_bytes : 1.0; }
};

// What a live view plots of a point, in its plotted units.
enum class LiveMetric { Loss = 0, Ratio, WireMb, ForwardMs, BackwardMs, CommWaitMs, HookMs, Count };
double live_metric(const LivePoint& point, LiveMetric metric);

// The latest per-bucket statistics of a run (rank 0's), by bucket and name.
struct BucketStats {
  std::int64_t run_id = 0;
  std::int64_t step = 0;
  std::map<std::uint32_t, std::map<std::string, double>> values;
};

// What the UI takes each frame.
struct LiveBatch {
  std::vector<LivePoint> points;
  std::vector<BucketStats> buckets;                            // at most one per run: its newest
  std::vector<std::pair<std::int64_t, std::string>> messages;  // (run, line) logs and errors
  bool empty() const { return points.empty() && buckets.empty() && messages.empty(); }
};

// Shared by every run's feed; the UI drains it.
class LiveQueue {
 public:
  void push(LivePoint point);
  void push(BucketStats stats);
  void push_message(std::int64_t run_id, std::string line);
  LiveBatch take();

 private:
  std::mutex mutex_;
  LiveBatch pending_;
};

class LiveFeed final : public EventSubscriber {
 public:
  // The world size comes from the ranks' hello events.
  LiveFeed(std::int64_t run_id, std::shared_ptr<LiveQueue> queue);
  void on_event(const events::Event& event) override;

 private:
  struct Partial {
    int ranks = 0;
    LivePoint sum;
  };
  std::int64_t run_id_;
  int world_size_ = 1;
  std::shared_ptr<LiveQueue> queue_;
  std::map<std::int64_t, Partial> partial_;
  std::int64_t started_ns_;
};

// A stored run's steps (every rank's rows) as the points a live view shows:
// the steps every reporting rank stored, averaged over ranks.
std::vector<LivePoint> stored_points(std::int64_t run_id, const std::vector<db::StepRow>& rows);

}  // namespace commtune::ui

// The bridge from a run's event stream to the run store: every step, hook
// statistic and message of every rank becomes rows queued on the store's
// writer. Cheap per event: no SQLite on the launcher's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/tuner/config/run_config.h"
#include "core/tuner/events/event_subscriber.h"
#include "db/store.h"
#include "db/writer.h"

namespace commtune {

class RunRecorder final : public EventSubscriber {
 public:
  // When a step happened: as it arrives (a run launched here), or the sum
  // of the rank's step times so far (a run read from event files, which may
  // arrive all at once).
  enum class WallClock { Arrival, StepTimes };
  // `wall_offset_s`: the run's wall time before this launch (a resumed or
  // continued run), so its steps' wall times continue where they stopped.
  RunRecorder(db::Writer& writer, std::int64_t run_id, double wall_offset_s = 0,
              WallClock clock = WallClock::Arrival);
  void on_event(const events::Event& event) override;

 private:
  std::int32_t name_id(const std::string& name);

  db::Writer& writer_;
  std::int64_t run_id_;
  double wall_offset_s_;
  WallClock clock_;
  std::chrono::steady_clock::time_point started_;
  std::unordered_map<int, double> rank_wall_s_;  // WallClock::StepTimes
  std::unordered_map<std::string, std::int32_t> names_;
};

// A short content hash (16 hex digits) of what makes runs comparable: the
// model and data sections, the seed, and the bytes of weights.init. Runs
// with equal fingerprints trained the same model on the same data.
std::string run_fingerprint(const RunConfig& config);

}  // namespace commtune

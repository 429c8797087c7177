// What the launcher makes of the event stream: a summary of the run, a live
// progress line, and a per-step metrics file.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/launcher.h"

namespace commtune {

// Accumulates every rank's events into the run's summary.
class RunSummary final : public EventSubscriber {
 public:
  explicit RunSummary(int world_size);
  void on_event(const events::Event& event) override;

  // Steps that every rank finished.
  std::int64_t steps_completed() const;
  // Mean loss over ranks at each completed step.
  std::vector<double> loss_curve() const;
  // Its last value: the run's last loss (core/tuner/store/run_metrics.h).
  std::optional<double> last_loss() const;
  nlohmann::json to_json(const RunOutcome& outcome, const nlohmann::json& config) const;

 private:
  struct Rank {
    std::vector<events::StepRecord> steps;  // without per-bucket stats, to bound memory
    std::map<std::string, double> last_stats;
    nlohmann::json end;
  };
  int world_size_;
  std::vector<Rank> ranks_;
  nlohmann::json run_start_;
  nlohmann::json buckets_;
  nlohmann::json checkpoints_ = nlohmann::json::array();
};

// A one-line live view on stderr: step, loss, step time split, bytes, ETA.
// Redrawn in place on a terminal; a line every ~10% otherwise.
class ProgressLine final : public EventSubscriber {
 public:
  ProgressLine(int world_size, std::int64_t total_steps, std::FILE* out = stderr);
  void on_event(const events::Event& event) override;
  void finish();

 private:
  struct Pending {
    int ranks = 0;
    double loss = 0;
    events::StepTimes times;
    double wire = 0;
    double uncompressed = 0;
  };
  void show(std::int64_t step, const Pending& p);

  int world_size_;
  std::int64_t total_steps_;
  std::FILE* out_;
  bool terminal_;
  bool drawn_ = false;
  std::map<std::int64_t, Pending> pending_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_draw_{};
  std::int64_t next_report_step_ = 0;
};

// One JSON object per rank and step (JSON Lines), for pandas and friends: a
// live log, put in place as the run starts (what was there, a symlink too,
// replaced: core/tuner/io/output_file.h) and grown a whole line at a time.
class MetricsFile final : public EventSubscriber {
 public:
  explicit MetricsFile(const std::string& path);
  void on_event(const events::Event& event) override;
  // Syncs it to the disk; throws std::runtime_error saying why it cannot.
  void commit() { out_.commit(); }

 private:
  OutputFile out_;
};

}  // namespace commtune

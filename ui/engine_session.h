// The GUI's handle on the engine: starts a run or a sweep on a thread of its
// own, records it in the store through one writer, and reports back with
// queued signals; live points go through a LiveQueue the dashboard drains
// once per frame. The UI thread never waits for a run or for SQLite.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/tuner/store/stop_requests.h"
#include "ui/live/live_feed.h"

namespace commtune::db {
class Writer;
}

namespace commtune::ui {

// A run (or a sweep trial's segment) that has just started.
struct RunStart {
  qint64 run_id = 0;
  QString label;
  qint64 from_step = 0;
  qint64 to_step = 0;   // the step it runs up to
  qint64 sweep_id = 0;  // 0 outside a sweep
  qint64 trial = 0;     // its number in the sweep (db::trial_number), 0 outside one
  qint64 trials = 0;
};

class EngineSession : public QObject {
  Q_OBJECT
 public:
  explicit EngineSession(QString store_path, QObject* parent = nullptr);
  ~EngineSession() override;  // stops what runs and waits for it

  const QString& store_path() const { return store_path_; }
  bool busy() const { return busy_; }
  LiveQueue& live() { return *queue_; }

  // Throw ConfigError (naming the field) or db::Error before anything starts.
  void start_run(const nlohmann::json& raw_config, const QString& name);
  void start_sweep(const nlohmann::json& spec);
  // Goes on with a stored sweep that was stopped or whose process died:
  // finished trials stay, an interrupted one continues from its checkpoint.
  void resume_sweep(qint64 sweep_id);
  // Stops one run (a sweep goes on with its next trial), or everything.
  // Its runs also stop at a request from another process (stop_requests.h).
  void stop_run(qint64 run_id);
  void stop_all();

 Q_SIGNALS:
  void run_started(const commtune::ui::RunStart& start);
  void run_finished(qint64 run_id, const QString& status, const QString& reason);
  // The run or sweep has ended: `message` says how.
  void job_finished(const QString& message, bool succeeded);

 private:
  db::Writer& writer();
  template <class Body>
  void start(Body body);
  const std::atomic<bool>* flag_for(qint64 run_id);
  // Runs a stored sweep to its end (or a stop) on the engine thread.
  std::pair<QString, bool> run_stored_sweep(db::Writer& store, std::int64_t sweep_id);

  QString store_path_;
  std::shared_ptr<LiveQueue> queue_ = std::make_shared<LiveQueue>();
  std::unique_ptr<db::Writer> writer_;
  std::thread thread_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_all_{false};
  std::mutex flags_mutex_;
  std::map<qint64, std::shared_ptr<std::atomic<bool>>> stop_flags_;
  // Another process's requests (`commtune-cli stop`, another window) set the same flags as stop_run.
  StopRequestWatcher stop_requests_;
};

}  // namespace commtune::ui

Q_DECLARE_METATYPE(commtune::ui::RunStart)

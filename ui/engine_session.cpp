#include "ui/engine_session.h"

#include <filesystem>

#include "core/tuner/config/run_config.h"
#include "core/tuner/launch/job.h"
#include "core/tuner/sweep/sweep_runner.h"
#include "core/tuner/sweep/sweep_spec.h"
#include "db/writer.h"

namespace commtune::ui {

EngineSession::EngineSession(QString store_path, QObject* parent)
    : QObject(parent), store_path_(std::move(store_path)), stop_requests_(store_path_.toStdString(), nullptr) {
  qRegisterMetaType<RunStart>();
}

EngineSession::~EngineSession() {
  stop_all();
  if (thread_.joinable()) thread_.join();
}

db::Writer& EngineSession::writer() {
  // A writer that stopped for good (a full disk, a damaged page) is not the
  // next launch's: that one opens the store again, so space freed meanwhile is used.
  if (writer_ && !writer_->error().empty()) writer_.reset();
  if (!writer_) writer_ = std::make_unique<db::Writer>(store_path_.toStdString());
  return *writer_;
}

const std::atomic<bool>* EngineSession::flag_for(qint64 run_id) {
  std::lock_guard lock(flags_mutex_);
  auto& flag = stop_flags_[run_id];
  if (!flag) flag = std::make_shared<std::atomic<bool>>(stop_all_.load());
  stop_requests_.watch(run_id, flag.get());
  return flag.get();
}

void EngineSession::stop_run(qint64 run_id) {
  std::lock_guard lock(flags_mutex_);
  if (const auto it = stop_flags_.find(run_id); it != stop_flags_.end()) it->second->store(true);
}

void EngineSession::stop_all() {
  stop_all_ = true;
  std::lock_guard lock(flags_mutex_);
  for (auto& [id, flag] : stop_flags_) flag->store(true);
}

template <class Body>
void EngineSession::start(Body body) {
  if (busy_) throw std::runtime_error("a run or sweep is already running: stop it first");
  if (thread_.joinable()) thread_.join();
  auto& store = writer();  // opening the store can fail: before the thread starts
  busy_ = true;
  stop_all_ = false;
  {
    std::lock_guard lock(flags_mutex_);
    for (const auto& [run_id, flag] : stop_flags_) stop_requests_.forget(run_id);
    stop_flags_.clear();
  }
  thread_ = std::thread([this, &store, body = std::move(body)] {
    QString message;
    bool ok = false;
    try {
      std::tie(message, ok) = body(store);
    } catch (const std::exception& e) {
      message = QString::fromUtf8(e.what());
    }
    busy_ = false;
    Q_EMIT job_finished(message, ok);
  });
}

void EngineSession::start_run(const nlohmann::json& raw_config, const QString& name) {
  const auto config = RunConfig::parse(raw_config);
  job_world_size(config);
  start([this, config, name](db::Writer& store) {
    JobRequest request;
    request.config = config;
    request.store = &store;
    request.name = name.toStdString();
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    request.cancel = cancel.get();
    request.subscriber_for_run = [this, &config, &name,
                                  cancel](std::int64_t run_id) -> std::unique_ptr<EventSubscriber> {
      {
        std::lock_guard lock(flags_mutex_);
        stop_flags_[run_id] = cancel;
        stop_requests_.watch(run_id, cancel.get());
      }
      if (stop_all_) cancel->store(true);  // stopped before the run had an id
      Q_EMIT run_started(RunStart{run_id, name.isEmpty() ? QString("run %1").arg(run_id) : name, 0, config.run.steps});
      return std::make_unique<LiveFeed>(run_id, queue_);
    };
    const auto result = run_job(request);
    if (result.run_id) stop_requests_.forget(*result.run_id);
    const auto status = QString::fromStdString(stored_status(result.outcome.status));
    const auto reason = QString::fromStdString(result.outcome.reason);
    if (result.run_id) Q_EMIT run_finished(*result.run_id, status, reason);
    return std::make_pair(QString("run %1 %2%3")
                              .arg(result.run_id.value_or(0))
                              .arg(status)
                              .arg(reason.isEmpty() ? QString() : ": " + reason),
                          result.outcome.status == RunStatus::Succeeded);
  });
}

void EngineSession::start_sweep(const nlohmann::json& spec_json) {
  const auto spec = SweepSpec::parse_new(spec_json);
  start([this, spec](db::Writer& store) { return run_stored_sweep(store, create_sweep(spec, store)); });
}

void EngineSession::resume_sweep(qint64 sweep_id) {
  start([this, sweep_id](db::Writer& store) { return run_stored_sweep(store, sweep_id); });
}

std::pair<QString, bool> EngineSession::run_stored_sweep(db::Writer& store, std::int64_t sweep_id) {
  SweepRunOptions options;
  options.store = &store;
  options.work_dir = (std::filesystem::path(store.path()).parent_path() / "sweeps").string();
  options.cancel = &stop_all_;
  options.trial_cancel = [this](const TrialEvent& e) { return flag_for(e.run_id); };
  options.on_trial = [this](const TrialEvent& e) {
    if (!e.finished)
      Q_EMIT run_started(
          RunStart{e.run_id, QString::fromStdString(e.label), e.from_step, e.to_step, e.sweep_id,
                   db::trial_number(e.trial), e.trials});
    else {
      stop_requests_.forget(e.run_id);
      Q_EMIT run_finished(e.run_id, QString::fromStdString(e.status), QString());
    }
  };
  options.subscribers = [this](const TrialEvent& e) {
    std::vector<std::unique_ptr<EventSubscriber>> out;
    out.push_back(std::make_unique<LiveFeed>(e.run_id, queue_));
    return out;
  };
  // Stop all in another window asks for the whole sweep (core/tuner/store/stop_requests.h).
  stop_requests_.watch_sweep(sweep_id, &stop_all_);
  const auto outcome = [&] {
    try {
      return run_sweep(sweep_id, options);
    } catch (...) {
      stop_requests_.forget_sweep(sweep_id);
      throw;
    }
  }();
  stop_requests_.forget_sweep(sweep_id);
  QStringList counts;
  for (const auto& [status, n] : outcome.trial_statuses)
    counts << QString("%1 %2").arg(n).arg(QString::fromStdString(status));
  return {QString("sweep %1 %2: %3").arg(sweep_id).arg(QString::fromStdString(outcome.status)).arg(counts.join(", ")),
          outcome.status == db::status::kSucceeded};
}

}  // namespace commtune::ui

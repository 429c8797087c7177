#include "ui/pages/dashboard_page.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <QFileInfo>
#include <cmath>
#include <set>

#include "core/tuner/store/run_label.h"
#include "core/tuner/store/stop_requests.h"
#include "db/store.h"
#include "ui/async.h"
#include "ui/plot/run_plots.h"

namespace commtune::ui {

namespace {
enum Column { kRun = 0, kLabel, kStatus, kProgress, kLoss, kLeft, kStop, kColumns };
}

QString format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "–";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 60) return QString("%1 s").arg(s);
  if (s < 3600) return QString("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QString("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
}

DashboardPage::DashboardPage(EngineSession& engine, QWidget* parent) : QWidget(parent), engine_(engine) {
  sweep_label_ = new QLabel("Nothing running. Start a run or a sweep on the Launch page (Ctrl+R, Ctrl+Shift+R).", this);
  sweep_label_->setObjectName("dashboard:label");
  sweep_progress_ = new QProgressBar(this);
  sweep_progress_->setObjectName("dashboard:progress");
  sweep_progress_->setRange(0, 1000);
  sweep_progress_->setValue(0);
  stop_all_ = new QPushButton("Stop all", this);
  stop_all_->setObjectName("dashboard:stop_all");
  stop_all_->setToolTip("Stop every running trial and the sweep (Ctrl+.); a sweep another process runs on this "
                        "machine stops as Ctrl-C in its terminal stops it");
  stop_all_->setEnabled(false);
  connect(stop_all_, &QPushButton::clicked, this, &DashboardPage::stop_all);

  trials_ = new QTableWidget(0, kColumns, this);
  trials_->setObjectName("dashboard:trials");
  trials_->setHorizontalHeaderLabels({"run", "trial", "status", "progress", "last loss", "time left", ""});
  trials_->horizontalHeader()->setSectionResizeMode(kLabel, QHeaderView::Stretch);
  trials_->horizontalHeader()->setSectionResizeMode(kProgress, QHeaderView::Stretch);
  trials_->verticalHeader()->setVisible(false);
  trials_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  trials_->setSelectionBehavior(QAbstractItemView::SelectRows);
  trials_->setMinimumHeight(100);

  plots_ = new RunPlots(this);
  log_ = new QPlainTextEdit(this);
  log_->setObjectName("dashboard:log");
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);
  log_->setPlaceholderText("Messages from the ranks and the scheduler appear here.");

  auto* top = new QHBoxLayout;
  top->addWidget(sweep_label_, 1);
  top->addWidget(sweep_progress_, 1);
  top->addWidget(stop_all_);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->setObjectName("dashboard:splitter");
  splitter->addWidget(trials_);
  splitter->addWidget(plots_);
  splitter->addWidget(log_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 5);
  splitter->setStretchFactor(2, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(splitter, 1);

  connect(&engine_, &EngineSession::run_started, this, &DashboardPage::on_started);
  connect(&engine_, &EngineSession::run_finished, this, &DashboardPage::on_finished);
  connect(&engine_, &EngineSession::job_finished, this, [this](const QString& message, bool ok) {
    update_stop_all();  // another process's sweep may still run beside it
    on_frame();
    sweep_label_->setText(message);
    log_->appendPlainText((ok ? "done: " : "ended: ") + message);
    if (ok) sweep_progress_->setValue(sweep_progress_->maximum());
  });
  frame_ = new QTimer(this);
  frame_->setInterval(16);
  connect(frame_, &QTimer::timeout, this, &DashboardPage::on_frame);
  frame_->start();
  poll_ = new QTimer(this);
  poll_->setInterval(500);
  connect(poll_, &QTimer::timeout, this, &DashboardPage::poll_followed);
  discover_ = new QTimer(this);
  discover_->setInterval(1000);
  connect(discover_, &QTimer::timeout, this, &DashboardPage::discover_runs);
  discover_->start();
}

namespace {

// What the dashboard needs of a run another process records.
DashboardPage::Found found_run(const db::Store& store, const db::RunRecord& run) {
  DashboardPage::Found found;
  found.owner = run.owner;
  auto& start = found.start;
  start.run_id = run.id;
  start.label = QString::fromStdString(run_label(run));
  start.to_step = run.steps_requested;
  if (run.sweep_id) {
    start.sweep_id = *run.sweep_id;
    start.trial = run.trial_number().value_or(0);
    // A sweep stores every trial it plans, baselines and seeds included, when
    // it is created (core/tuner/sweep/sweep_runner.h): what is stored is its size.
    // The axes' count leaves the baselines out ("14 of 12 trials ended").
    db::RunFilter trials;
    trials.sweep_id = run.sweep_id;
    start.trials = static_cast<qint64>(store.runs(trials).size());
  }
  return found;
}

}  // namespace

void DashboardPage::follow_stored_run(qint64 run_id) {
  if (followed_.count(run_id)) return;
  run_async(
      this,
      [path = engine_.store_path().toStdString(), run_id] {
        db::Store store(path, db::Store::Access::ReadOnly);
        const auto run = store.run(run_id);
        if (!run) throw db::Error("there is no run " + std::to_string(run_id));
        return found_run(store, *run);
      },
      [this, run_id](const Outcome<Found>& found) {
        if (!found.value) return log_->appendPlainText(QString("run %1: %2").arg(run_id).arg(found.error));
        follow(*found.value);
      });
}

void DashboardPage::show_sweep(qint64 sweep_id) {
  struct Stored {
    Found found;
    QString status, reason;
    std::vector<LivePoint> points;
  };
  struct Read {
    std::vector<Stored> trials;
    std::string running_elsewhere;  // the sweep's owner, when another live process runs it now
  };
  run_async(
      this,
      [path = engine_.store_path().toStdString(), sweep_id] {
        db::Store store(path, db::Store::Access::ReadOnly);
        const auto sweep = store.sweep(sweep_id);
        if (!sweep) throw db::Error("there is no sweep " + std::to_string(sweep_id));
        Read out;
        if (sweep->status == db::status::kRunning && sweep->owner != db::this_process_owner() &&
            db::owner_alive(sweep->owner))
          out.running_elsewhere = sweep->owner;
        db::RunFilter filter;
        filter.sweep_id = sweep_id;
        for (const auto& run : store.runs(filter))
          out.trials.push_back({found_run(store, run), QString::fromStdString(run.status),
                                QString::fromStdString(run.reason), stored_points(run.id, store.steps(run.id))});
        return out;
      },
      [this, sweep_id](const Outcome<Read>& read) {
        if (!read.value) return log_->appendPlainText(QString("sweep %1: %2").arg(sweep_id).arg(read.error));
        const auto& trials = read.value->trials;
        const bool running =
            !followed_sweeps_.empty() || std::any_of(tracks_.begin(), tracks_.end(), [](const auto& entry) {
              return entry.second.status == db::status::kRunning;
            });
        if (!running) {  // what ended makes room, as for a new job
          plots_->clear();
          tracks_.clear();
          followed_.clear();
          sweep_ends_.clear();
          trials_->setRowCount(0);
        }
        log_->appendPlainText(QString("sweep %1 from the store: %2 trials").arg(sweep_id).arg(trials.size()));
        replaying_ = true;
        for (const auto& stored : trials) {
          const auto id = stored.found.start.run_id;
          if (tracks_.count(id)) continue;  // shown already
          if (stored.status == db::status::kRunning && !stored.found.owner.empty() &&
              stored.found.owner != db::this_process_owner() && db::owner_alive(stored.found.owner)) {
            follow(stored.found);  // recorded as we look: followed until it ends
            continue;
          }
          on_started(stored.found.start);
          show_points(stored.points);
          on_finished(id, stored.status, {});
        }
        replaying_ = false;
        sweep_id_ = sweep_id;
        // Between two of its trials another process's sweep runs no trial to follow; Stop all reaches it still.
        if (!read.value->running_elsewhere.empty()) {
          followed_sweeps_[sweep_id] = read.value->running_elsewhere;
          sweep_ends_.erase(sweep_id);
          poll_->start();
        }
        update_stop_all();
        sweep_label_->setText(sweep_text());
      });
}

void DashboardPage::discover_runs() {
  if (discovering_ || !QFileInfo::exists(engine_.store_path())) return;
  discovering_ = true;
  run_async(
      this,
      [path = engine_.store_path().toStdString()] {
        db::Store store(path, db::Store::Access::ReadOnly);
        db::RunFilter running;
        running.statuses = {db::status::kRunning};
        std::vector<Found> out;
        const auto me = db::this_process_owner();
        for (const auto& run : store.runs(running))
          if (run.owner != me && db::owner_alive(run.owner)) out.push_back(found_run(store, run));
        return out;
      },
      [this](const Outcome<std::vector<Found>>& out) {
        discovering_ = false;
        if (!out.value) return;
        for (const auto& found : *out.value) {
          const auto it = tracks_.find(found.start.run_id);
          if (!followed_.count(found.start.run_id) && (it == tracks_.end() || it->second.status != db::status::kRunning))
            follow(found);
        }
      });
}

void DashboardPage::follow(const Found& found) {
  const auto run_id = found.start.run_id;
  // This window's own runs come through the live feed; a signal to "their process" would stop the app.
  if (followed_.count(run_id) || found.owner == db::this_process_owner()) return;
  on_started(found.start);
  auto& t = tracks_[run_id];
  t.owner = found.owner;
  if (auto* stop = trials_->cellWidget(t.row, kStop)) {
    stop->setEnabled(true);
    stop->setToolTip("Recorded by another process (commtune-cli run, sweep or import --follow, or another window): "
                     "asks it to stop this run; a sweep goes on with its next trial, an import stops following");
  }
  followed_[run_id] = 0;
  if (found.start.sweep_id) {
    followed_sweeps_[found.start.sweep_id] = found.owner;  // its sweep too, not only this window's own jobs
    sweep_ends_.erase(found.start.sweep_id);              // resumed since it last ended
  }
  update_stop_all();
  sweep_label_->setText(sweep_text());
  poll_->start();
  poll_followed();
}

void DashboardPage::stop_followed(qint64 run_id) {
  try {
    request_stop(engine_.store_path().toStdString(), run_id);
    log_->appendPlainText(QString("run %1: asked the process that records it to stop it").arg(run_id));
  } catch (const std::exception& e) {
    log_->appendPlainText(QString("run %1: %2").arg(run_id).arg(QString::fromUtf8(e.what())));
  }
}

void DashboardPage::stop_all() {
  if (engine_.busy()) engine_.stop_all();
  // What other processes run: their running trials, and their sweeps followed here (between two trials, none
  // runs). A commtune-cli here is asked once, as Ctrl-C in its terminal (a sweep ends, cancelled, and can be
  // resumed); another window, or a process on another host, through stop requests for its trials and sweeps.
  std::map<std::string, std::set<qint64>> sweeps_of;  // owner -> its sweeps shown here
  for (const auto& [id, t] : tracks_)
    if (!t.owner.empty() && t.status == db::status::kRunning) {
      auto& sweeps = sweeps_of[t.owner];
      if (t.sweep_id) sweeps.insert(t.sweep_id);
    }
  for (const auto& [sweep, owner] : followed_sweeps_) sweeps_of[owner].insert(sweep);
  for (const auto& [owner, sweeps] : sweeps_of) {
    if (interrupt_owner(owner)) {
      log_->appendPlainText(QString("asked its process (%1) to stop, as Ctrl-C in its terminal would")
                                .arg(QString::fromStdString(owner)));
      continue;
    }
    for (const auto& [run, t] : tracks_)
      if (t.owner == owner && t.status == db::status::kRunning) stop_followed(run);
    for (const auto sweep : sweeps) {
      try {
        request_sweep_stop(engine_.store_path().toStdString(), sweep);
        log_->appendPlainText(QString("sweep %1 (%2, another window or host): asked to stop, with its running trials")
                                  .arg(sweep)
                                  .arg(QString::fromStdString(owner)));
      } catch (const std::exception& e) {
        log_->appendPlainText(QString("sweep %1: %2").arg(sweep).arg(QString::fromUtf8(e.what())));
      }
    }
  }
}

void DashboardPage::update_stop_all() {
  stop_all_->setEnabled(engine_.busy() || !followed_.empty() || !followed_sweeps_.empty());
}

void DashboardPage::poll_followed() {
  if (polling_) return;
  if (followed_.empty() && followed_sweeps_.empty()) {
    poll_->stop();
    return;
  }
  struct Read {
    qint64 run_id;
    QString status, reason;
    std::vector<LivePoint> points;
  };
  struct Polled {
    std::vector<Read> runs;
    std::vector<std::pair<qint64, QString>> ended_sweeps;  // followed sweeps the store says ended, and how
  };
  polling_ = true;
  run_async(
      this,
      [path = engine_.store_path().toStdString(), followed = followed_, sweeps = followed_sweeps_] {
        db::Store store(path, db::Store::Access::ReadOnly);
        Polled out;
        for (const auto& [id, from] : followed) {
          const auto run = store.run(id);
          if (!run) continue;
          // A Stop clicked as the run ended, too late for its process to take it, is not left behind.
          if (run->status != db::status::kRunning) withdraw_stop_request(path, id);
          out.runs.push_back({id, QString::fromStdString(run->status), QString::fromStdString(run->reason),
                              stored_points(id, store.steps(id, std::nullopt, from))});
        }
        for (const auto& [id, owner] : sweeps) {
          const auto sweep = store.sweep(id);
          if (!sweep)
            out.ended_sweeps.emplace_back(id, "deleted");
          else if (sweep->status != db::status::kRunning)
            out.ended_sweeps.emplace_back(id, QString::fromStdString(sweep->status));
          else if (!db::owner_alive(sweep->owner))
            out.ended_sweeps.emplace_back(id, "interrupted (its process is gone)");
        }
        return out;
      },
      [this](const Outcome<Polled>& out) {
        polling_ = false;
        if (!out.value) return;
        for (const auto& r : out.value->runs) {
          if (!followed_.count(r.run_id)) continue;
          if (!r.points.empty()) followed_[r.run_id] = r.points.back().step + 1;
          show_points(r.points);
          if (r.status != db::status::kRunning) {
            followed_.erase(r.run_id);
            on_finished(r.run_id, r.status, r.reason);
            sweep_label_->setText(sweep_text());
          }
        }
        for (const auto& [id, status] : out.value->ended_sweeps) {
          // Read before the sweep went on (resumed, its trial followed since): not its end.
          const bool running_again = std::any_of(tracks_.begin(), tracks_.end(), [id](const auto& entry) {
            return entry.second.sweep_id == id && entry.second.status == db::status::kRunning;
          });
          if (running_again || !followed_sweeps_.erase(id)) continue;
          sweep_ends_[id] = status;
          log_->appendPlainText(QString("sweep %1 (recorded by another process) ended: %2").arg(id).arg(status));
          sweep_label_->setText(sweep_text());
          update_stop_all();
        }
      });
}

void DashboardPage::show_stored_steps(qint64 run_id, qint64 before_step) {
  run_async(
      this,
      [path = engine_.store_path().toStdString(), run_id, before_step] {
        db::Store store(path, db::Store::Access::ReadOnly);
        auto points = stored_points(run_id, store.steps(run_id));
        points.erase(std::remove_if(points.begin(), points.end(),
                                    [&](const LivePoint& p) { return p.step >= before_step; }),
                     points.end());
        return points;
      },
      [this, run_id](const Outcome<std::vector<LivePoint>>& out) {
        if (!out.value) return;
        plots_->merge(run_id, *out.value);
        plots_->refresh();
      });
}

int DashboardPage::row_of(qint64 run_id) const {
  const auto it = tracks_.find(run_id);
  return it == tracks_.end() ? -1 : it->second.row;
}

QString DashboardPage::status_of(qint64 run_id) const {
  const auto it = tracks_.find(run_id);
  return it == tracks_.end() ? QString() : it->second.status;
}

void DashboardPage::on_started(const RunStart& start) {
  // A sweep's next trial belongs to the job already shown, even after another
  // job (this window's run beside a terminal's sweep) took the label meanwhile.
  const bool new_job = start.sweep_id == 0 || std::none_of(tracks_.begin(), tracks_.end(), [&](const auto& entry) {
                         return entry.second.sweep_id == start.sweep_id;
                       });
  if (!new_job && start.sweep_id != sweep_id_) {
    sweep_id_ = start.sweep_id;
    trials_total_ = std::max<qint64>(1, start.trials);
  }
  if (new_job) {
    // What ended goes; what still runs (another process's sweep, between two trials too; this one's) stays
    // beside the new job.
    const bool still_running =
        !followed_sweeps_.empty() || std::any_of(tracks_.begin(), tracks_.end(), [&](const auto& entry) {
          return entry.first != start.run_id && entry.second.status == db::status::kRunning;
        });
    if (!still_running) {
      plots_->clear();
      tracks_.clear();
      followed_.clear();
      sweep_ends_.clear();
      trials_->setRowCount(0);
    }
    sweep_id_ = start.sweep_id;
    trials_total_ = std::max<qint64>(1, start.trials);
    job_clock_.start();
    if (!replaying_)
      log_->appendPlainText(start.sweep_id ? QString("sweep %1 started: %2 trials").arg(start.sweep_id).arg(start.trials)
                                         : QString("run %1 started").arg(start.run_id));
  }
  stop_all_->setEnabled(true);
  sweep_ends_.erase(start.sweep_id);  // going on again (resumed), whatever it said when it last ended
  auto& t = tracks_[start.run_id];
  if (t.row < 0) {
    t.row = trials_->rowCount();
    trials_->insertRow(t.row);
    trials_->setItem(t.row, kRun, new QTableWidgetItem(QString::number(start.run_id)));
    // A sweep's trial by its number, as the sweep's log and `list` give it.
    trials_->setItem(t.row, kLabel,
                     new QTableWidgetItem(start.trial ? QString("%1: %2").arg(start.trial).arg(start.label) : start.label));
    trials_->setItem(t.row, kStatus, new QTableWidgetItem);
    trials_->setItem(t.row, kLoss, new QTableWidgetItem);
    trials_->setItem(t.row, kLeft, new QTableWidgetItem);
    auto* bar = new QProgressBar(trials_);
    bar->setFormat("step %v of %m");
    trials_->setCellWidget(t.row, kProgress, bar);
    auto* stop = new QPushButton("Stop", trials_);
    stop->setObjectName(QString("dashboard:stop:%1").arg(start.run_id));
    stop->setToolTip("Stop this trial; a sweep goes on with the next one");
    connect(stop, &QPushButton::clicked, this, [this, id = start.run_id] {
      if (!tracks_[id].owner.empty()) return stop_followed(id);
      engine_.stop_run(id);
    });
    trials_->setCellWidget(t.row, kStop, stop);
    plots_->add_run(start.run_id, QString("%1 %2").arg(start.run_id).arg(start.label));
  }
  // A resumed run goes on from its checkpoint: what an earlier attempt showed
  // past it is gone from the store, and what the store holds before it is shown.
  plots_->truncate(start.run_id, start.from_step);
  if (start.from_step > 0) show_stored_steps(start.run_id, start.from_step);
  if (auto* bar = static_cast<QProgressBar*>(trials_->cellWidget(t.row, kProgress)))
    bar->setRange(0, static_cast<int>(std::max<qint64>(1, start.to_step)));
  t.sweep_id = start.sweep_id;
  t.from_step = start.from_step;
  t.to_step = start.to_step;
  t.first_live_step = -1;
  t.finished_s = -1;
  t.status = db::status::kRunning;
  trials_->item(t.row, kStatus)->setText(t.status);
  if (auto* stop = trials_->cellWidget(t.row, kStop)) stop->setEnabled(true);
  update_sweep_progress();
}

void DashboardPage::on_finished(qint64 run_id, const QString& status, const QString& reason) {
  const auto it = tracks_.find(run_id);
  if (it == tracks_.end()) return;
  auto& t = it->second;
  on_frame();  // take the run's last points first
  t.status = status;
  t.finished_s = t.since_first.isValid() ? t.since_first.elapsed() / 1e3 : 0;
  trials_->item(t.row, kStatus)->setText(status);
  trials_->item(t.row, kLeft)->setText(status == db::status::kSucceeded ? "done" : "");
  if (auto* stop = trials_->cellWidget(t.row, kStop)) stop->setEnabled(false);
  update_stop_all();
  if (!reason.isEmpty()) log_->appendPlainText(QString("run %1 %2: %3").arg(run_id).arg(status, reason));
  update_sweep_progress();
}

double DashboardPage::seconds_left(const Track& t) const {
  if (t.first_live_step < 0 || t.last_step <= t.first_live_step) return NAN;
  const double rate = (t.last_step - t.first_live_step) / std::max(1e-3, t.since_first.elapsed() / 1e3);
  return (t.to_step - 1 - t.last_step) / rate;
}

void DashboardPage::on_frame() {
  auto batch = engine_.live().take();
  if (batch.empty()) return;
  for (const auto& b : batch.buckets) plots_->set_bucket_stats(b);
  for (const auto& [run, line] : batch.messages)
    log_->appendPlainText(QString("run %1, %2").arg(run).arg(QString::fromStdString(line)));
  show_points(batch.points);
}

void DashboardPage::show_points(const std::vector<LivePoint>& points) {
  std::map<qint64, const LivePoint*> newest;
  for (const auto& p : points) {
    plots_->append(p);
    newest[p.run_id] = &p;
  }
  for (const auto& [run_id, p] : newest) {
    auto it = tracks_.find(run_id);
    if (it == tracks_.end()) continue;
    auto& t = it->second;
    if (t.first_live_step < 0) {
      t.first_live_step = p->step;
      t.since_first.start();
    }
    t.last_step = p->step;
    if (auto* bar = static_cast<QProgressBar*>(trials_->cellWidget(t.row, kProgress)))
      bar->setValue(static_cast<int>(std::min<qint64>(p->step + 1, bar->maximum())));
    trials_->item(t.row, kLoss)->setText(QString::number(p->loss, 'g', 5));
    trials_->item(t.row, kLeft)->setText(format_duration(seconds_left(t)));
  }
  plots_->refresh();
  update_sweep_progress();
}

void DashboardPage::update_sweep_progress() {
  double done = 0, finished_time = 0, running_left = 0;
  int finished = 0, running = 0;
  for (const auto& [id, t] : tracks_) {
    if (t.sweep_id != sweep_id_) continue;  // another job's, shown beside this one
    if (t.status == db::status::kRunning) {
      ++running;
      const double span = std::max<qint64>(1, t.to_step);
      done += std::clamp((t.last_step + 1) / span, 0.0, 1.0);
      const double left = seconds_left(t);
      if (std::isfinite(left)) running_left = std::max(running_left, left);
    } else {
      ++finished;
      done += 1;
      if (t.finished_s >= 0) finished_time += t.finished_s;
    }
  }
  sweep_progress_->setValue(static_cast<int>(1000.0 * done / std::max<qint64>(1, trials_total_)));
  if (!running && !finished) return;
  const double per_trial = finished ? finished_time / finished : NAN;
  const auto waiting = std::max<qint64>(0, trials_total_ - finished - running);
  const double left = running_left + (waiting ? waiting * per_trial : 0.0);
  if (running) sweep_label_->setText(sweep_text() + ", about " + format_duration(left) + " left");
}

QString DashboardPage::sweep_text() const {
  int ended = 0;
  qint64 last = -1;
  bool followed = false;
  for (const auto& [id, t] : tracks_) {
    if (t.sweep_id != sweep_id_) continue;
    ended += t.status != db::status::kRunning;
    last = id;
    followed = followed || !t.owner.empty();
  }
  if (last < 0) return sweep_label_->text();
  const QString from = followed ? " (recorded by another process)" : "";
  if (sweep_id_ > 0) {
    const auto end = sweep_ends_.find(sweep_id_);
    return QString("Sweep %1%2%3: %4 of %5 trials ended")
        .arg(sweep_id_)
        .arg(from, end == sweep_ends_.end() ? QString() : " " + end->second)
        .arg(ended)
        .arg(trials_total_);
  }
  const auto& t = tracks_.at(last);
  return QString("Run %1%2%3").arg(last).arg(from).arg(t.status == db::status::kRunning ? "" : " " + t.status);
}

}  // namespace commtune::ui

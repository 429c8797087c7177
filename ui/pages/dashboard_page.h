// The live dashboard: every run of the current job (a run, or a sweep's
// trials) overlaid on the same plots, a progress bar per trial and for the
// sweep with the time left, and buttons to stop one trial or everything.
// A frame timer drains the engine's live queue, so however fast events
// arrive the plots are redrawn at most once per frame. Runs that another
// process records (a CLI run or sweep, an imported multi-node job) show up
// by themselves: the store is looked at every second for running runs of
// other live processes, and each is followed from the store, read twice a
// second. Their Stop files a stop request (core/tuner/store/stop_requests.h) that
// the recording process takes: the run stops, a sweep goes on.
#pragma once

#include <QElapsedTimer>
#include <QWidget>
#include <map>

#include "ui/engine_session.h"

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;
class QTimer;

namespace commtune::ui {

class RunPlots;

class DashboardPage : public QWidget {
  Q_OBJECT
 public:
  DashboardPage(EngineSession& engine, QWidget* parent = nullptr);
  // A run another process records, as found in the store.
  struct Found {
    RunStart start;
    std::string owner;
  };

  RunPlots* plots() const { return plots_; }
  // The row of a run in the trial table (-1 when not shown).
  int row_of(qint64 run_id) const;
  QString status_of(qint64 run_id) const;
  // Shows a running run from the store, as it is recorded, until it ends.
  void follow_stored_run(qint64 run_id);
  // Puts a sweep back on the dashboard from the store, finished or not: its
  // ended trials as they ended, a running one followed.
  void show_sweep(qint64 sweep_id);
  // Looks in the store for runs other processes have started (a timer calls it).
  void discover_runs();
  QString sweep_text() const;  // the label above the trials
  // Stops this window's job and what other processes run here (Ctrl-C to a
  // sweep started in a terminal); elsewhere, their running trials.
  void stop_all();

 private:
  struct Track {
    int row = -1;
    qint64 from_step = 0, to_step = 0, last_step = -1;
    qint64 first_live_step = -1;
    QElapsedTimer since_first;
    double finished_s = -1;
    QString status;
    qint64 sweep_id = 0;
    std::string owner;  // of a run another process records: "host:pid:start"
  };
  void follow(const Found& found);
  void stop_followed(qint64 run_id);
  void on_started(const RunStart& start);
  void on_finished(qint64 run_id, const QString& status, const QString& reason);
  void on_frame();
  void show_points(const std::vector<LivePoint>& points);
  void poll_followed();
  void show_stored_steps(qint64 run_id, qint64 before_step);
  void update_sweep_progress();
  // Stop all is live while anything it would stop runs: this window's job, a
  // followed run, or a followed sweep between two of its trials.
  void update_stop_all();
  double seconds_left(const Track& t) const;

  EngineSession& engine_;
  RunPlots* plots_;
  QTableWidget* trials_;
  QProgressBar* sweep_progress_;
  QLabel* sweep_label_;
  QPushButton* stop_all_;
  QPlainTextEdit* log_;
  QTimer* frame_;
  QTimer* poll_;
  QTimer* discover_;
  std::map<qint64, qint64> followed_;  // run -> the first step not shown yet
  // Sweeps another process records, shown here: their owner, until the store says they ended.
  std::map<qint64, std::string> followed_sweeps_;
  std::map<qint64, QString> sweep_ends_;  // how a followed sweep ended, once the store said so
  bool polling_ = false, discovering_ = false;
  bool replaying_ = false;  // a sweep put back from the store: its trials did not start now
  std::map<qint64, Track> tracks_;
  qint64 sweep_id_ = -1;
  qint64 trials_total_ = 0;
  QElapsedTimer job_clock_;
};

QString format_duration(double seconds);

}  // namespace commtune::ui

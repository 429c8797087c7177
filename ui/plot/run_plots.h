// The plots of one or more runs, live or stored: loss (against step or wall
// time), compression ratio, bytes on the wire per step, the step-time
// breakdown of one run, and its newest per-bucket statistics. Points are
// appended as they come and drawn once per refresh(), from min/max-reduced
// copies, so a frame costs the same for 1k or 1M points per run.
//
// Made for sweeps of 30+ trials: the legend is a list beside the plots
// (check to show, double-click to solo, hover to highlight), every curve can
// be smoothed (TensorBoard's debiased EMA) and every plot has a log y axis.
#pragma once

#include <QVariant>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <vector>

#include "ui/live/live_feed.h"
#include "ui/plot/plot_readout.h"
#include "ui/plot/series_model.h"
#include "ui/theme.h"

class QCustomPlot;
class QCPGraph;
class QComboBox;
class QCheckBox;
class QLabel;
class QTreeWidget;
class QSlider;

namespace commtune::ui {

class BucketTable;
class GroupCurves;
class TrialList;

class RunPlots : public QWidget {
  Q_OBJECT
 public:
  explicit RunPlots(QWidget* parent = nullptr);
  ~RunPlots() override;

  // `label` as "12 matrix_approximation_rank=2 lr=0.05": its parameter=value
  // words become the trial list's columns, unless `values` gives them.
  void add_run(std::int64_t run_id, const QString& label, const std::vector<std::pair<QString, QString>>& values = {});
  bool has_run(std::int64_t run_id) const;
  void clear();
  void append(const LivePoint& point);  // drawn at the next refresh()
  // Forgets a run's points from `step` on (a resumed run repeats them).
  void truncate(std::int64_t run_id, std::int64_t step);
  // Adds points of steps the run does not show yet, wherever they fall
  // (the stored steps before a resumed run's live ones).
  void merge(std::int64_t run_id, const std::vector<LivePoint>& points);

  // The trial list beside the plots.
  void set_run_visible(std::int64_t run_id, bool visible);
  bool run_visible(std::int64_t run_id) const;
  void solo(std::int64_t run_id);  // only this run; again: every run
  void solo(const std::vector<std::int64_t>& run_ids);  // only these (a group's)
  void show_all();
  void highlight(std::int64_t run_id);  // drawn thick, the others faded; -1: none
  // EMA weight in [0, 1): 0 draws the raw points.
  void set_smoothing(double weight);
  double smoothing() const { return model_.smoothing(); }
  enum class Plot { Loss, StepTime, Ratio, Wire };
  void set_log_y(Plot plot, bool on);
  QCustomPlot* plot(Plot which) const;
  QTreeWidget* run_list() const;  // a row per run: swept values as columns
  void set_bucket_stats(const BucketStats& stats);

  // Seed replicas (labels equal but for seed=N) drawn as one mean curve with
  // a band of one standard deviation, when Group is on "seeds".
  using SeedGroup = commtune::ui::SeedGroup;
  void set_group_seeds(bool on);
  // Any parameter the runs' labels or values name, as W&B groups runs: the
  // runs that share its value as one mean curve and band. False: no run names it.
  bool set_group_by(const QString& param);
  std::vector<SeedGroup> seed_groups() const;   // the replicas among the runs shown
  std::vector<SeedGroup> shown_groups() const;  // those drawn as groups now
  QCPGraph* group_mean_graph(std::size_t group) const;
  QCPGraph* group_band_graph(std::size_t group, bool upper) const;
  // Pushes what changed since the last call into the plots and redraws them.
  // `immediate`: draw now (benchmarks) rather than at the next paint.
  void refresh(bool immediate = false);
  void apply_theme(const Theme& theme);
  void set_empty_text(const QString& text);

  // For export and tests.
  std::vector<std::pair<QString, QCustomPlot*>> plots() const;
  QCustomPlot* loss_plot() const { return loss_plot_; }
  // The hover readout of a plot.
  PlotReadout* readout(Plot which) const;
  QCPGraph* loss_graph(std::int64_t run_id) const;      // as drawn: smoothed
  QCPGraph* raw_loss_graph(std::int64_t run_id) const;  // faint under it while smoothing is on
  std::size_t points(std::int64_t run_id) const;  // appended so far
  std::vector<LivePoint> points_of(std::int64_t run_id) const;  // as appended, unsmoothed
  int bucket_rows() const;                        // buckets in the statistics table

 Q_SIGNALS:
  // A click on a run's curve (that run), or on a seed group's (the group's runs).
  void runs_clicked(const std::vector<std::int64_t>& run_ids);

 public:
  QString csv() const;                            // every run's points

 private:
  struct Run;
  // The most a curve draws (min/max pairs beyond): about a plot's width in
  // pixels, so a min/max pair per two pixel columns keeps every spike while
  // drawing 90 curves (30 trials x 3 plots) stays within a frame (bench/plot_bench).
  static constexpr std::size_t kDrawnPoints = 1024;
  enum Metric { kLoss = 0, kRatio, kWire, kForward, kBackward, kCommWait, kHook, kMetrics };
  void update_breakdown_choice();
  void restyle(Run& run);
  void set_x_axis_labels();
  void redraw_from_raw(Run& run);  // after the smoothing or the points changed
  Run* find(std::int64_t run_id) const;
  void visibility_changed();
  std::optional<PlotHit> curve_hit(QCustomPlot* plot, const QPointF& pixel) const;
  void regroup();
  // The Group choices: seeds, and each parameter some runs share a value of
  // and others do not; the user's choice comes back once it varies again
  // (runs opened anew arrive one by one).
  void update_group_choices();
  void restyle_groups();

  SeriesModel model_;  // the points and their numbers; what follows draws them
  QCustomPlot* loss_plot_;
  QCustomPlot* ratio_plot_;
  QCustomPlot* wire_plot_;
  QCustomPlot* breakdown_plot_;
  QComboBox* x_axis_;
  std::vector<QCheckBox*> log_y_;  // by Plot
  QSlider* smoothing_slider_;
  QLabel* smoothing_label_;
  TrialList* trial_list_;
  QComboBox* breakdown_run_;
  BucketTable* bucket_table_;
  QLabel* empty_label_;
  std::vector<std::unique_ptr<Run>> runs_;
  std::vector<PlotReadout*> readouts_;  // loss, ratio, bytes, step time
  std::unique_ptr<GroupCurves> groups_;  // on the loss plot
  QComboBox* group_by_;  // none, seeds, or a parameter (its name as the item's data)
  QVariant group_choice_;  // the user's (the item's data), kept while the runs offer it not
  bool axis_changed_ = true;
  std::int64_t highlighted_ = -1;
  std::vector<std::int64_t> soloed_;
  Theme theme_;
};

}  // namespace commtune::ui

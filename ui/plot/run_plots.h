// The plots of one or more runs, live or stored: loss (against step or wall
// time), compression ratio, bytes on the wire per step, the step-time
// breakdown of one run, and its newest per-bucket statistics. Points are
// appended as they come and drawn once per refresh(), from min/max-reduced
// copies, so a frame costs the same for 1k or 1M points per run.
#pragma once

#include <QWidget>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "ui/live/live_feed.h"
#include "ui/plot/minmax_series.h"
#include "ui/theme.h"

class QCustomPlot;
class QCPGraph;
class QComboBox;
class QCheckBox;
class QTableWidget;
class QLabel;

namespace commtune::ui {

class RunPlots : public QWidget {
  Q_OBJECT
 public:
  explicit RunPlots(QWidget* parent = nullptr);
  ~RunPlots() override;

  void add_run(std::int64_t run_id, const QString& label);
  bool has_run(std::int64_t run_id) const;
  void clear();
  void append(const LivePoint& point);  // drawn at the next refresh()
  void set_bucket_stats(const BucketStats& stats);
  // Pushes what changed since the last call into the plots and redraws them.
  // `immediate`: draw now (benchmarks) rather than at the next paint.
  void refresh(bool immediate = false);
  void apply_theme(const Theme& theme);
  void set_empty_text(const QString& text);

  // For export and tests.
  std::vector<std::pair<QString, QCustomPlot*>> plots() const;
  QCustomPlot* loss_plot() const { return loss_plot_; }
  std::size_t points(std::int64_t run_id) const;  // appended so far
  int bucket_rows() const;                        // buckets in the statistics table
  QString csv() const;                            // every run's points

 private:
  struct Run;
  enum Metric { kLoss = 0, kRatio, kWire, kForward, kBackward, kCommWait, kHook, kMetrics };
  void update_breakdown_choice();
  void restyle(Run& run);
  void set_x_axis_labels();

  QCustomPlot* loss_plot_;
  QCustomPlot* ratio_plot_;
  QCustomPlot* wire_plot_;
  QCustomPlot* breakdown_plot_;
  QComboBox* x_axis_;
  QCheckBox* log_loss_;
  QComboBox* breakdown_run_;
  QTableWidget* bucket_table_;
  QLabel* empty_label_;
  std::vector<std::unique_ptr<Run>> runs_;
  std::map<std::int64_t, BucketStats> bucket_stats_;
  bool bucket_stats_changed_ = false;
  bool axis_changed_ = true;
  Theme theme_;
};

// Colours a plot (background, axes, grid, title, legend) for the theme.
void style_plot(QCustomPlot* plot, const Theme& theme);

}  // namespace commtune::ui

// Analysis of a sweep (or of every stored run): quality against
// communication as a Pareto front (tail loss against bytes on the wire or
// the predicted step time on a chosen cluster), the network what-if table
// with the recommendation per network, and the effect of two swept
// parameters on the loss as a heatmap (e.g. PowerSGD rank x start
// iteration), the sweep as parallel coordinates (brushing filters the trial
// table under it) and each swept parameter's share of the loss's variance.
// It follows the store: a newly started or finished sweep is shown when it
// appears. Computed off the UI thread from the store.
#pragma once

#include <QWidget>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/verdict/sweep_analysis.h"
#include "ui/plot/plot_readout.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QPushButton;
class QSpinBox;
class QDoubleSpinBox;
class QTableWidget;
class QTabWidget;
class QSplitter;

namespace commtune::ui {

struct Theme;
class ParallelCoordinates;
class ParetoView;
class HeatmapView;
class SliceView;
class ImportanceView;
class HistoryView;
class DistributionView;
class ScatterMatrixView;

class AnalysisPage : public QWidget {
  Q_OBJECT
 public:
  AnalysisPage(QString store_path, QWidget* parent = nullptr);
  ~AnalysisPage() override;

  void refresh();  // reloads the list of sweeps, then the analysis
  void select_sweep(std::int64_t sweep_id);
  void apply_theme(const Theme& theme);
  const SweepAnalysis& data() const { return data_; }
  QTableWidget* what_if_table() const { return what_if_; }
  std::vector<QCustomPlot*> plots() const;
  std::int64_t shown_sweep() const;  // 0: every stored run
  bool analysing() const { return pending_ > 0; }  // a store read or an analysis is on its way
  QDoubleSpinBox* tolerance() const { return tolerance_; }
  ParallelCoordinates* parallel() const { return parallel_; }
  QTableWidget* parallel_table() const { return parallel_table_; }
  QTabWidget* views() const { return views_; }
  PlotReadout* pareto_readout() const { return pareto_readout_; }
  // The runs (one per configuration) on the Pareto plot's front, cheapest first.
  const std::vector<std::int64_t>& pareto_front_runs() const { return pareto_front_; }
  PlotReadout* heatmap_readout() const { return heatmap_readout_; }
  PlotReadout* slice_readout() const { return slice_readout_; }
  PlotReadout* importance_readout() const { return importance_readout_; }
  PlotReadout* history_readout() const { return history_readout_; }
  PlotReadout* distribution_readout() const { return distribution_readout_; }
  PlotReadout* scatter_readout() const { return scatter_readout_; }

 Q_SIGNALS:
  void analysed();
  // The user asks to go on with a stopped or interrupted sweep.
  void resume_requested(qint64 sweep_id);
  // The user asks to see this sweep's trials on the Dashboard.
  void dashboard_requested(qint64 sweep_id);
  // The user asks to see these runs on the Runs page.
  void open_runs_requested(const std::vector<std::int64_t>& run_ids);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void analyse();
  void draw_pareto();
  void draw_heatmap();
  void fill_what_if();
  void fit_what_if();
  void fill_parallel();
  void fill_parallel_table();
  void draw_importance();
  void draw_slice();
  void draw_history();

  QString store_path_;
  QComboBox* scope_;
  QComboBox* x_metric_;
  QComboBox* link_;
  QSpinBox* nodes_;
  QSpinBox* ranks_per_node_;
  QDoubleSpinBox* compute_scale_;
  QDoubleSpinBox* tolerance_;
  QTabWidget* views_;
  ParallelCoordinates* parallel_;
  QTableWidget* parallel_table_;
  QCustomPlot* importance_;
  QLabel* importance_note_;  // the decomposition used
  QComboBox* heat_x_;
  QComboBox* heat_y_;
  QCustomPlot* pareto_;
  QCustomPlot* heatmap_;
  QTableWidget* what_if_;
  QSplitter* splitter_;  // the views over the what-if table
  QLabel* note_;
  QPushButton* resume_;
  QPushButton* to_dashboard_;
  SweepAnalysis data_;
  std::vector<std::int64_t> pareto_front_;
  std::unique_ptr<ParetoView> pareto_view_;
  std::unique_ptr<HeatmapView> heatmap_view_;
  std::unique_ptr<SliceView> slice_view_;
  std::unique_ptr<ImportanceView> importance_view_;
  std::unique_ptr<HistoryView> history_view_;
  std::unique_ptr<DistributionView> distribution_view_;
  std::unique_ptr<ScatterMatrixView> scatter_view_;
  QCustomPlot* scatter_;
  PlotReadout* scatter_readout_;
  QCustomPlot* history_;
  QCustomPlot* distribution_;
  PlotReadout* history_readout_;
  PlotReadout* distribution_readout_;
  QComboBox* slice_param_;
  QCustomPlot* slice_;
  PlotReadout* slice_readout_;
  PlotReadout* importance_readout_;
  PlotReadout* pareto_readout_;
  PlotReadout* heatmap_readout_;
  std::int64_t wanted_sweep_ = -1;  // the user's choice (-1: none yet, the page shows the newest sweep)
  std::int64_t newest_sweep_ = -1;  // the newest sweep the list has shown (-1: not read yet)
  QPushButton* newer_sweep_;        // offers a sweep that appeared while the user reads another
  std::int64_t offered_sweep_ = 0;
  int generation_ = 0;
  int pending_ = 0;
};

}  // namespace commtune::ui

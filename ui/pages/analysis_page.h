// Analysis of a sweep (or of every stored run): quality against
// communication as a Pareto front (tail loss against bytes on the wire or
// the predicted step time on a chosen cluster), the network what-if table
// with the recommendation per network, and the effect of two swept
// parameters on the loss as a heatmap (e.g. PowerSGD rank x start
// iteration). Computed off the UI thread from the store.
#pragma once

#include <QWidget>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

class QComboBox;
class QCustomPlot;
class QLabel;
class QPushButton;
class QSpinBox;
class QDoubleSpinBox;
class QTableWidget;

namespace commtune::ui {

struct Theme;

struct AnalysisPoint {
  std::int64_t run_id = 0;
  QString label;
  double loss = 0;
  std::optional<double> wire_mb, predicted_ms;
  bool baseline = false;
  std::map<std::string, QString> axis_values;  // swept parameter -> value as text
};

struct WhatIfRow {
  QString network;
  std::optional<double> baseline_ms, best_ms, speedup;
  QString best, verdict;
};

struct AnalysisData {
  std::vector<AnalysisPoint> points;
  std::vector<WhatIfRow> what_if;
  std::vector<std::string> axes;  // the sweep's swept parameters
  QString note;                   // why something is missing
};

class AnalysisPage : public QWidget {
  Q_OBJECT
 public:
  AnalysisPage(QString store_path, QWidget* parent = nullptr);

  void refresh();  // reloads the list of sweeps, then the analysis
  void select_sweep(std::int64_t sweep_id);
  void apply_theme(const Theme& theme);
  const AnalysisData& data() const { return data_; }
  QTableWidget* what_if_table() const { return what_if_; }
  std::vector<QCustomPlot*> plots() const { return {pareto_, heatmap_}; }

 Q_SIGNALS:
  void analysed();
  // The user asks to go on with a stopped or interrupted sweep.
  void resume_requested(qint64 sweep_id);

 private:
  void analyse();
  void draw_pareto();
  void draw_heatmap();
  void fill_what_if();

  QString store_path_;
  QComboBox* scope_;
  QComboBox* x_metric_;
  QComboBox* link_;
  QSpinBox* nodes_;
  QSpinBox* ranks_per_node_;
  QDoubleSpinBox* compute_scale_;
  QComboBox* heat_x_;
  QComboBox* heat_y_;
  QCustomPlot* pareto_;
  QCustomPlot* heatmap_;
  QTableWidget* what_if_;
  QLabel* note_;
  QPushButton* resume_;
  AnalysisData data_;
  std::int64_t wanted_sweep_ = -1;
  int generation_ = 0;
};

}  // namespace commtune::ui

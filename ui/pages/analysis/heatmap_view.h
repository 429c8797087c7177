// The Analysis page's heatmap: the loss over two swept parameters, as a
// grid's cells (the best configuration in each, mean over its seeds) or, for
// values drawn rather than gridded (random search, TPE), a filled contour
// between the trials; and what a cell or trial under the pointer reads.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tuner/verdict/sweep_analysis.h"
#include "ui/plot/plot_readout.h"

class QCustomPlot;
#include <map>
#include <utility>

namespace commtune::ui {

class HeatmapView {
 public:
  HeatmapView(QCustomPlot* plot, QString font_family) : plot_(plot), font_family_(std::move(font_family)) {}
  void draw(const SweepAnalysis& data, const std::string& x, const std::string& y);
  std::optional<PlotHit> hit(const QPointF& pixel) const;

 private:
  void draw_contour(const SweepAnalysis& data, const std::string& x, const std::string& y);

  QCustomPlot* plot_;
  QString font_family_;
  std::map<std::pair<int, int>, PlotHit> cells_;  // what each cell reads
  bool contour_ = false;                          // drawn as a filled contour (values not on a grid)
  std::vector<const AnalysedRun*> trials_;        // the contour's trial points, in their graph's order
};

}  // namespace commtune::ui

// The Analysis page's scatter-plot matrix (core/tuner/verdict/sweep_figures.h): a
// column per swept parameter, a row per result (tail loss, ms per step), a
// point per trial in each panel, the parameters' axes shared down their
// column; and what a point under the pointer reads (a click opens its run).
#pragma once

#include <QString>
#include <optional>
#include <vector>

#include "core/tuner/verdict/sweep_figures.h"
#include "ui/plot/plot_readout.h"

class QCustomPlot;
class QCPGraph;

namespace commtune::ui {

class ScatterMatrixView {
 public:
  explicit ScatterMatrixView(QCustomPlot* plot) : plot_(plot) {}
  void draw(const ScatterMatrix& matrix);
  std::optional<PlotHit> hit(const QPointF& pixel) const;
  // The panel's graph of a column and a row (nullptr when there is none).
  QCPGraph* panel(std::size_t column, std::size_t row) const;

 private:
  struct Panel {
    QCPGraph* graph;
    std::size_t column, row;
    std::vector<std::size_t> trials;  // the graph's points: indices into matrix_.trials
  };
  QCustomPlot* plot_;
  ScatterMatrix matrix_;
  std::vector<Panel> panels_;
};

}  // namespace commtune::ui

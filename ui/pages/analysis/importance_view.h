// The Analysis page's importance bars: each swept parameter's share of the
// tail loss's variance (core/sweep/param_importance.h), interactions and
// noise, with the decomposition named under them; and what a bar reads.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/verdict/sweep_analysis.h"
#include "ui/plot/plot_readout.h"

class QCustomPlot;
class QLabel;

namespace commtune::ui {

class ImportanceView {
 public:
  ImportanceView(QCustomPlot* plot, QLabel* note) : plot_(plot), note_(note) {}
  void draw(const ImportanceResult& importance);
  std::optional<PlotHit> hit(const QPointF& pixel) const;

 private:
  QCustomPlot* plot_;
  QLabel* note_;  // the decomposition used
  std::vector<Importance> shares_;
};

}  // namespace commtune::ui

// The Analysis page's importance bars: each swept parameter's share of the
// tail loss's variance (core/tuner/sweep/param_importance.h), interactions and
// noise, with the decomposition named under them and beside each parameter
// the sign of its effect (core/tuner/verdict/sweep_figures.h: + the loss rises with
// it, − it falls); and what a bar reads.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tuner/verdict/sweep_analysis.h"
#include "core/tuner/verdict/sweep_figures.h"
#include "ui/plot/plot_readout.h"

class QCustomPlot;
class QLabel;

namespace commtune::ui {

class ImportanceView {
 public:
  ImportanceView(QCustomPlot* plot, QLabel* note) : plot_(plot), note_(note) {}
  void draw(const ImportanceResult& importance, const std::vector<ParamCorrelation>& correlations = {});
  std::optional<PlotHit> hit(const QPointF& pixel) const;

 private:
  QCustomPlot* plot_;
  QLabel* note_;  // the decomposition used
  std::vector<Importance> shares_;
  std::vector<ParamCorrelation> correlations_;
  const ParamCorrelation* correlation_of(const std::string& param) const;
};

}  // namespace commtune::ui

// The Analysis page's optimization history and the tail loss's empirical
// distribution (core/tuner/verdict/sweep_figures.h), as optuna-dashboard draws
// them: each trial's tail loss at its number in the sweep with the best so
// far as a step line, and the share of trials at or below each loss; the
// allreduce baseline marked on both. What a point under the pointer reads.
#pragma once

#include <QString>
#include <optional>

#include "core/tuner/verdict/sweep_figures.h"
#include "ui/plot/plot_readout.h"

class QCustomPlot;

namespace commtune::ui {

class HistoryView {
 public:
  explicit HistoryView(QCustomPlot* plot) : plot_(plot) {}
  void draw(const OptimizationHistory& history);
  std::optional<PlotHit> hit(const QPointF& pixel) const;

 private:
  QCustomPlot* plot_;
  OptimizationHistory history_;
  std::vector<std::size_t> drawn_;  // the trials graph's points: indices into history_.trials
};

class DistributionView {
 public:
  explicit DistributionView(QCustomPlot* plot) : plot_(plot) {}
  void draw(const EmpiricalDistribution& edf, std::optional<double> baseline_loss);
  std::optional<PlotHit> hit(const QPointF& pixel) const;

 private:
  QCustomPlot* plot_;
  EmpiricalDistribution edf_;
};

}  // namespace commtune::ui

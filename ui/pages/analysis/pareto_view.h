// The Analysis page's Pareto plot: one point per configuration (its seeds'
// mean loss, their spread as an error bar) against bytes on the wire or the
// predicted step time, the front that core/tuner/verdict/pareto.h marks (as
// `compare` lists it) drawn as a step line, labels on the front and the
// baseline kept apart, and what a point under the pointer reads.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tuner/verdict/sweep_analysis.h"
#include "ui/plot/plot_readout.h"

class QCustomPlot;

namespace commtune::ui {

class ParetoView {
 public:
  explicit ParetoView(QCustomPlot* plot) : plot_(plot) {}
  // `by_time`: the predicted step time on `link` across, else MB on the wire.
  void draw(const SweepAnalysis& data, bool by_time, const QString& link, const QString& font_family);
  std::optional<PlotHit> hit(const QPointF& pixel) const;
  // The runs (one per configuration) on the front, cheapest first.
  const std::vector<std::int64_t>& front() const { return front_; }

 private:
  QCustomPlot* plot_;
  bool by_time_ = false;
  std::vector<const AnalysedRun*> points_;  // in the order of the plot's points
  std::vector<std::int64_t> front_;
};

}  // namespace commtune::ui

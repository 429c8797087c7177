// The Analysis page's slice: the loss against one swept parameter, one point
// per configuration (its seeds' mean) in the order of its value, the best
// ringed; and what a point under the pointer reads.
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

class SliceView {
 public:
  explicit SliceView(QCustomPlot* plot) : plot_(plot) {}
  void draw(const SweepAnalysis& data, const std::string& param);
  std::optional<PlotHit> hit(const QPointF& pixel) const;

 private:
  QCustomPlot* plot_;
  std::string param_;
  std::vector<const AnalysedRun*> points_;  // in the order of the plot's points
};

}  // namespace commtune::ui

// Hover readouts and clicks on a plot's points, as optuna-dashboard and W&B
// have them: the pointer over a point (within a few pixels) shows what it is
// in a tooltip (run, step or trial values, the figure); a click (not a drag)
// on it says which runs it stands for. What a point is comes from the plot's
// owner through a finder, which knows its graphs and their runs.
#pragma once

#include <QObject>
#include <QPointF>
#include <QString>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

class QCustomPlot;
class QCPGraph;

namespace commtune::ui {

// What is under the pointer: the readout, and the runs a click opens.
struct PlotHit {
  QString text;
  std::vector<std::int64_t> runs;
};

class PlotReadout : public QObject {
  Q_OBJECT
 public:
  using Finder = std::function<std::optional<PlotHit>(const QPointF& pixel)>;
  PlotReadout(QCustomPlot* plot, Finder finder);

  // What the pointer at `pixel` reads (and shows it, as a move there would).
  std::optional<PlotHit> hover(const QPointF& pixel);

 Q_SIGNALS:
  void clicked(const std::vector<std::int64_t>& runs);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QCustomPlot* plot_;
  Finder finder_;
  QPointF pressed_at_;
};

// The data point of the plot's visible graphs nearest to `pixel`, within
// `radius` pixels: graphs are sorted by key, so each costs a binary search
// and a look at the points around it.
struct NearestPoint {
  QCPGraph* graph = nullptr;
  int index = 0;
  double key = 0, value = 0;
  double distance = 0;  // in pixels
};
std::optional<NearestPoint> nearest_point(QCustomPlot* plot, const QPointF& pixel, double radius = 10);

}  // namespace commtune::ui

#include "ui/plot/plot_readout.h"

#include <QMouseEvent>
#include <QToolTip>
#include <cmath>

#include "ui/plot/qcustomplot.h"

namespace commtune::ui {

PlotReadout::PlotReadout(QCustomPlot* plot, Finder finder) : QObject(plot), plot_(plot), finder_(std::move(finder)) {
  plot_->setMouseTracking(true);
  plot_->installEventFilter(this);
}

std::optional<PlotHit> PlotReadout::hover(const QPointF& pixel) {
  auto hit = finder_(pixel);
  if (hit)  // as plain text: a run's name is the user's, and a tooltip would read tags in it as HTML
    QToolTip::showText(plot_->mapToGlobal(pixel.toPoint()),
                       "<div style=\"white-space:pre\">" + hit->text.toHtmlEscaped() + "</div>", plot_);
  else
    QToolTip::hideText();
  return hit;
}

bool PlotReadout::eventFilter(QObject* watched, QEvent* event) {
  if (watched != plot_) return false;
  switch (event->type()) {
    case QEvent::MouseMove:
      if (static_cast<QMouseEvent*>(event)->buttons() == Qt::NoButton)
        hover(static_cast<QMouseEvent*>(event)->position());
      break;
    case QEvent::MouseButtonPress:
      pressed_at_ = static_cast<QMouseEvent*>(event)->position();
      break;
    case QEvent::MouseButtonRelease: {
      const auto* mouse = static_cast<QMouseEvent*>(event);
      // A click, not the end of a drag (the plots pan and zoom).
      if (mouse->button() != Qt::LeftButton || (mouse->position() - pressed_at_).manhattanLength() > 4) break;
      if (const auto hit = finder_(mouse->position()); hit && !hit->runs.empty()) Q_EMIT clicked(hit->runs);
      break;
    }
    default:
      break;
  }
  return false;
}

std::optional<NearestPoint> nearest_point(QCustomPlot* plot, const QPointF& pixel, double radius) {
  std::optional<NearestPoint> best;
  for (int g = 0; g < plot->graphCount(); ++g) {
    auto* graph = plot->graph(g);
    if (!graph->visible() || graph->data()->isEmpty()) continue;
    const double key = graph->keyAxis()->pixelToCoord(pixel.x());
    const auto data = graph->data();
    auto it = data->findBegin(key, false);
    // The points around the pointer's key: the nearest in pixels may be a few to either side.
    const int centre = static_cast<int>(it - data->constBegin());
    for (int i = std::max(0, centre - 8); i < std::min(data->size(), centre + 8); ++i) {
      const auto point = data->at(i);
      if (!std::isfinite(point->value)) continue;
      const QPointF at(graph->keyAxis()->coordToPixel(point->key), graph->valueAxis()->coordToPixel(point->value));
      const double distance = std::hypot(at.x() - pixel.x(), at.y() - pixel.y());
      if (distance <= radius && (!best || distance < best->distance))
        best = NearestPoint{graph, i, point->key, point->value, distance};
    }
  }
  return best;
}

}  // namespace commtune::ui

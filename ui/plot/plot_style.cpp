#include "ui/plot/plot_style.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "ui/plot/minmax_series.h"
#include "ui/plot/qcustomplot.h"

namespace commtune::ui {

QCustomPlot* make_plot(const QString& title, const QString& y_label, QWidget* parent) {
  auto* plot = new QCustomPlot(parent);
  plot->setObjectName("plot:" + title);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold)));
  plot->yAxis->setLabel(y_label);
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot->setMinimumSize(280, 130);  // two rows of them and the trial table fit a 768-px screen
  plot->setNoAntialiasingOnDrag(true);
  return plot;
}

void style_axis(QCPAxis* axis, const Theme& t) {
  axis->setBasePen(QPen(t.muted));
  axis->setTickPen(QPen(t.muted));
  axis->setSubTickPen(QPen(t.muted));
  axis->setTickLabelColor(t.foreground);
  axis->setLabelColor(t.foreground);
}

void style_plot(QCustomPlot* plot, const Theme& t) {
  plot->setBackground(t.background);
  for (auto* axis : {plot->xAxis, plot->yAxis}) {
    style_axis(axis, t);
    axis->grid()->setPen(QPen(t.grid, 0, Qt::DotLine));
    axis->grid()->setZeroLinePen(Qt::NoPen);
  }
  if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))) title->setTextColor(t.foreground);
  plot->legend->setBrush(QBrush(t.background));
  plot->legend->setTextColor(t.foreground);
  plot->legend->setBorderPen(QPen(t.grid));
}

QCPColorGradient viridis_gradient() {
  QCPColorGradient gradient;
  gradient.setColorStops({{0.0, QColor(0x44, 0x01, 0x54)},
                          {0.25, QColor(0x3b, 0x52, 0x8b)},
                          {0.5, QColor(0x21, 0x91, 0x8c)},
                          {0.75, QColor(0x5e, 0xc9, 0x62)},
                          {1.0, QColor(0xfd, 0xe7, 0x25)}});
  gradient.setColorInterpolation(QCPColorGradient::ciRGB);
  return gradient;
}

void set_log_axis(QCPAxis* axis, bool log) {
  axis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  axis->setTicker(log ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                      : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
}

namespace {

// The value range of the visible data on the axis's plot; nullopt when it shows none.
std::optional<QCPRange> data_value_range(QCPAxis* axis) {
  const auto domain = axis->scaleType() == QCPAxis::stLogarithmic ? QCP::sdPositive : QCP::sdBoth;
  std::optional<QCPRange> out;
  for (auto* plottable : axis->plottables()) {
    if (!plottable->realVisibility()) continue;
    bool found = false;
    const auto r = plottable->getValueRange(found, domain);
    if (found) out = out ? QCPRange(std::min(out->lower, r.lower), std::max(out->upper, r.upper)) : r;
  }
  return out;
}

}  // namespace

// After rescaleAxes: QCustomPlot centres a constant series in the axis's
// previous span (-0.5 .. 4.5 on a new plot, or whatever other runs left), so
// the data's own range says whether it is flat.
void widen_flat_range(QCPAxis* axis) {
  const auto data = data_value_range(axis);
  if (!data) return;
  const auto range = *data;
  if (axis->scaleType() == QCPAxis::stLogarithmic) {
    // Within a decade, labels at powers of ten would need a decade of empty
    // space around the data: plain ticks (1.2, 1.4, ...) on the log scale instead.
    const bool within_decade = range.lower > 0 && range.upper / range.lower < 10;
    const bool log_ticks = !axis->ticker().dynamicCast<QCPAxisTickerLog>().isNull();
    if (within_decade && log_ticks) axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    if (!within_decade && !log_ticks) axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog));
    if (range.lower > 0 && range.upper / range.lower < 1.02) {  // flat: +-5% around it
      const double centre = std::sqrt(range.lower * range.upper);
      axis->setRange(centre / 1.05, centre * 1.05);
    } else if (range.lower > 0) {
      // Fitted exactly, the lowest level (a compressed run's bytes, the one
      // that matters) lies on the axis line and reads as nothing: 5% of the
      // span, in decades, above and below the data.
      const double pad = std::max(1.05, std::pow(range.upper / range.lower, 0.05));
      axis->setRange(range.lower / pad, range.upper * pad);
    }
    return;
  }
  // A constant (a compression ratio, bytes per step) gets +-5% around it:
  // round labels (1.9, 2, 2.1) rather than 1.999 .. 2.0005. A series that
  // varies a little gets at least 0.1% of its size (or 1e-9 around 0): ticks
  // 1e-4 apart in relative terms, which six significant digits tell apart.
  const double centre = range.center();
  if (range.size() <= 1e-12 * std::abs(centre) || range.size() == 0) {
    const double half = centre == 0 ? 0.5 : std::abs(centre) * 0.05;
    axis->setRange(centre - half, centre + half);
    return;
  }
  const double least = std::max(1e-9, std::abs(centre) * 1e-3);
  if (range.size() < least) axis->setRange(centre - least / 2, centre + least / 2);
}

void set_graph_data(QCPGraph* graph, const MinMaxSeries& series) {
  const auto& xs = series.drawn_x();
  const auto& ys = series.drawn_y();
  QVector<QCPGraphData> data(static_cast<qsizetype>(xs.size()));
  for (std::size_t i = 0; i < xs.size(); ++i) data[static_cast<qsizetype>(i)] = QCPGraphData(xs[i], ys[i]);
  graph->data()->set(data, true);
}

}  // namespace commtune::ui

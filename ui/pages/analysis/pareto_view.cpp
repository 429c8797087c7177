#include "ui/pages/analysis/pareto_view.h"

#include <QFont>
#include <QFontMetrics>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "ui/forms/param_field.h"
#include "ui/plot/qcustomplot.h"
#include "ui/plot/plot_style.h"
#include "ui/theme.h"
#include "core/tuner/verdict/pareto.h"

namespace commtune::ui {

void ParetoView::draw(const SweepAnalysis& data, bool by_time, const QString& link, const QString& font_family) {
  plot_->clearGraphs();
  plot_->clearItems();
  points_.clear();
  by_time_ = by_time;
  plot_->xAxis->setLabel(by_time ? QString("predicted step time on %1 (ms)").arg(link)
                                   : QString("MB on the wire per step per rank"));
  const Theme t = current_theme();
  // One point per configuration: its seeds' mean loss, their spread as an
  // error bar; the order and the front are core/tuner/verdict/pareto.h's, as
  // `compare` lists them.
  std::map<std::int64_t, const AnalysedRun*> by_configuration;
  std::vector<TradeOff> candidates;
  for (const auto& p : data.runs) {
    const auto id = p.configuration();
    if (!by_configuration.emplace(id, &p).second) continue;
    if (const auto x = by_time ? p.predicted_ms : p.wire_mb) candidates.push_back({id, *x, p.loss_mean});
  }
  const auto ordered = pareto_order(std::move(candidates));
  front_ = pareto_front(ordered);
  auto* all = plot_->addGraph();
  all->setLineStyle(QCPGraph::lsNone);
  all->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, t.series_color(0), 7));
  auto* spread = new QCPErrorBars(plot_->xAxis, plot_->yAxis);
  spread->setDataPlottable(all);
  spread->setPen(QPen(t.series_color(0)));
  auto* front = plot_->addGraph();
  front->setPen(QPen(t.series_color(1), 1.5));
  front->setLineStyle(QCPGraph::lsStepLeft);
  front->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(t.series_color(1), 2), QBrush(), 11));
  QVector<double> errors;
  std::vector<std::pair<double, const AnalysedRun*>> labelled;  // the front and the baseline
  for (const auto& [point, on_front] : ordered) {
    const auto* p = by_configuration.at(point.run_id);
    const double x = point.cost;
    all->addData(x, p->loss_mean);
    points_.push_back(p);
    errors.push_back(std::isnan(p->loss_sd) ? 0.0 : p->loss_sd);
    if (on_front) front->addData(x, p->loss_mean);
    if (on_front || p->baseline) labelled.emplace_back(x, p);
  }
  spread->setData(errors);
  // Compressed runs send orders of magnitude less than allreduce: bytes on a log axis.
  plot_->xAxis->setScaleType(by_time ? QCPAxis::stLinear : QCPAxis::stLogarithmic);
  plot_->xAxis->setTicker(by_time ? QSharedPointer<QCPAxisTicker>(new QCPAxisTicker)
                                    : QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog));
  plot_->rescaleAxes();
  const auto xr = plot_->xAxis->range();
  if (by_time)
    plot_->xAxis->scaleRange(1.2);
  else if (xr.lower > 0)
    plot_->xAxis->setRange(xr.lower / 3, xr.upper * 6);  // room for the labels right of the points
  plot_->yAxis->scaleRange(1.15);
  // Labels on the front and the baseline only (the rest read on hover), each
  // moved down past the ones placed before it so that none covers another.
  plot_->replot(QCustomPlot::rpImmediateRefresh);  // the axes' pixel geometry
  const QFont label_font(font_family, 8);
  const QFontMetrics metrics(label_font);
  std::vector<QRectF> placed;
  for (const auto& [x, p] : labelled) {
    const auto text = QString("%1%2%3")
                          .arg(p->configuration())
                          .arg(p->seeds > 1 ? QString(" (%1 seeds)").arg(p->seeds) : QString())
                          .arg(p->baseline ? " allreduce" : "");
    const QPointF anchor(plot_->xAxis->coordToPixel(x) + 5, plot_->yAxis->coordToPixel(p->loss_mean) - 2);
    QRectF rect(anchor - QPointF(0, metrics.height()), QSizeF(metrics.horizontalAdvance(text) + 4, metrics.height()));
    for (int tries = 0; tries < 20 && std::any_of(placed.begin(), placed.end(),
                                                  [&](const QRectF& r) { return r.intersects(rect); });
         ++tries)
      rect.translate(0, metrics.height());
    placed.push_back(rect);
    auto* item = new QCPItemText(plot_);
    item->setObjectName("pareto:label");
    // In plot coordinates, so that the label pans and zooms with its point.
    item->position->setCoords(plot_->xAxis->pixelToCoord(rect.left()), plot_->yAxis->pixelToCoord(rect.bottom()));
    item->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    item->setText(text);
    item->setColor(p->baseline ? t.series_color(3) : t.muted);
    item->setFont(label_font);
  }
  plot_->replot();
}

std::optional<PlotHit> ParetoView::hit(const QPointF& pixel) const {
  // Every configuration under the pointer: points that fall together are read together.
  if (plot_->graphCount() == 0) return std::nullopt;
  auto* all = plot_->graph(0);
  PlotHit hit;
  QStringList lines;
  for (int i = 0; i < all->data()->size() && i < static_cast<int>(points_.size()); ++i) {
    const auto point = all->data()->at(i);
    const QPointF at(plot_->xAxis->coordToPixel(point->key), plot_->yAxis->coordToPixel(point->value));
    if (std::hypot(at.x() - pixel.x(), at.y() - pixel.y()) > 8) continue;
    const auto* p = points_[static_cast<std::size_t>(i)];
    const auto id = p->configuration();
    hit.runs.push_back(id);
    const auto loss = QString::fromStdString(tail_loss_text(*p));
    lines << QString("run %1 %2%3: %4 %5, %6")
                 .arg(id)
                 .arg(QString::fromStdString(p->label), p->baseline ? " (allreduce baseline)" : "")
                 .arg(QString::number(point->key, 'g', 4),
                      by_time_ ? QString("ms/step") : QString("MB/step"), loss);
  }
  if (lines.isEmpty()) return std::nullopt;
  hit.text = lines.join("\n");
  return hit;
}

}  // namespace commtune::ui

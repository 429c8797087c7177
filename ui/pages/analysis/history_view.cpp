#include "ui/pages/analysis/history_view.h"

#include <algorithm>
#include <cmath>

#include "ui/plot/plot_style.h"
#include "ui/plot/qcustomplot.h"
#include "ui/theme.h"

namespace commtune::ui {

namespace {

// A dashed line across the plot at the allreduce baseline's loss (horizontal) or at x (vertical), labelled.
void baseline_line(QCustomPlot* plot, double at, bool vertical, const Theme& t) {
  auto* line = new QCPItemStraightLine(plot);
  line->point1->setCoords(vertical ? at : 0, vertical ? 0 : at);
  line->point2->setCoords(vertical ? at : 1, vertical ? 1 : at);
  line->setPen(QPen(t.muted, 1.2, Qt::DashLine));
  auto* label = new QCPItemText(plot);
  label->setText("allreduce baseline");
  label->setColor(t.foreground);
  label->setFont(QFont(plot->font().family(), 8));
  if (vertical) {
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(at, 0.02);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setPadding(QMargins(4, 0, 0, 0));
  } else {
    label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(0.99, at);
    label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
  }
}

}  // namespace

void HistoryView::draw(const OptimizationHistory& history) {
  history_ = history;
  drawn_.clear();
  plot_->clearGraphs();
  plot_->clearItems();
  const Theme t = current_theme();
  auto* trials = plot_->addGraph();
  trials->setName("trial");
  trials->setLineStyle(QCPGraph::lsNone);
  trials->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, t.series_color(0), 6));
  auto* best = plot_->addGraph();
  best->setName("best so far");
  best->setObjectName("history:best");
  best->setLineStyle(QCPGraph::lsStepLeft);
  best->setPen(QPen(t.series_color(1), 2));
  for (std::size_t i = 0; i < history.trials.size(); ++i) {
    const auto& p = history.trials[i];
    if (std::isfinite(p.loss)) {
      trials->addData(p.trial, p.loss);
      drawn_.push_back(i);
    }
    if (p.best) best->addData(p.trial, *p.best);
  }
  plot_->legend->setVisible(!history.trials.empty());
  // The sweep's own numbers (list, show and the sweep's log give the same), the baselines' left to the line.
  plot_->xAxis->setLabel(history.trials.empty() ? "needs a sweep with finished trials"
                         : history.diverged
                             ? QString("trial (%1 diverged, not drawn)").arg(history.diverged)
                             : QString("trial"));
  plot_->rescaleAxes();
  if (history.baseline_loss) {
    baseline_line(plot_, *history.baseline_loss, false, t);
    plot_->yAxis->setRange(std::min(plot_->yAxis->range().lower, *history.baseline_loss),
                           std::max(plot_->yAxis->range().upper, *history.baseline_loss));
  }
  std::int64_t last = 2;
  for (const auto& p : history.trials) last = std::max(last, p.trial);
  plot_->xAxis->setRange(0.5, static_cast<double>(last) + 0.5);
  // Trial numbers are whole: a tick every 1, 2, 5, 10, ... trials, never between two.
  auto whole = QSharedPointer<QCPAxisTickerFixed>::create();
  whole->setTickStep(1);
  whole->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot_->xAxis->setTicker(whole);
  plot_->yAxis->scaleRange(1.15);
  widen_flat_range(plot_->yAxis);
  plot_->replot();
}

std::optional<PlotHit> HistoryView::hit(const QPointF& pixel) const {
  const auto near = nearest_point(plot_, pixel);
  if (!near) return std::nullopt;
  if (near->graph == plot_->graph(0) && near->index < static_cast<int>(drawn_.size())) {
    const auto& p = history_.trials[drawn_[static_cast<std::size_t>(near->index)]];
    return PlotHit{QString("trial %1 (run %2): tail loss %3%4")
                       .arg(p.trial)
                       .arg(p.run_id)
                       .arg(p.loss, 0, 'g', 5)
                       .arg(p.improved ? ", a new best" : QString(", best so far %1").arg(*p.best, 0, 'g', 5)),
                   {p.run_id}};
  }
  if (near->graph == plot_->graph(1))
    return PlotHit{QString("best so far after trial %1: tail loss %2").arg(near->key, 0, 'f', 0).arg(near->value, 0, 'g', 5),
                   {}};
  return std::nullopt;
}

void DistributionView::draw(const EmpiricalDistribution& edf, std::optional<double> baseline_loss) {
  edf_ = edf;
  plot_->clearGraphs();
  plot_->clearItems();
  const Theme t = current_theme();
  auto* steps = plot_->addGraph();
  steps->setName("trials");
  steps->setLineStyle(QCPGraph::lsStepLeft);
  steps->setPen(QPen(t.series_color(0), 2));
  steps->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, t.series_color(0), 5));
  for (std::size_t i = 0; i < edf.losses.size(); ++i) steps->addData(edf.losses[i], edf.fractions[i]);
  plot_->xAxis->setLabel(edf.trials == 0 ? "needs a sweep with finished trials"
                         : edf.diverged ? QString("tail loss (%1 of %2 trials diverged: the curve ends at %3%)")
                                              .arg(edf.diverged)
                                              .arg(edf.trials)
                                              .arg(100.0 * (edf.trials - edf.diverged) / edf.trials, 0, 'f', 0)
                                        : QString("tail loss"));
  plot_->rescaleAxes();
  if (baseline_loss) {
    baseline_line(plot_, *baseline_loss, true, t);
    plot_->xAxis->setRange(std::min(plot_->xAxis->range().lower, *baseline_loss),
                           std::max(plot_->xAxis->range().upper, *baseline_loss));
  }
  plot_->xAxis->scaleRange(1.1);
  widen_flat_range(plot_->xAxis);
  plot_->yAxis->setRange(0, 1.05);
  plot_->replot();
}

std::optional<PlotHit> DistributionView::hit(const QPointF& pixel) const {
  const auto near = nearest_point(plot_, pixel);
  if (!near || near->graph != plot_->graph(0)) return std::nullopt;
  const double share = edf_.at(near->key);
  return PlotHit{QString("tail loss ≤ %1: %2 of %3 trials (%4%)")
                     .arg(near->key, 0, 'g', 5)
                     .arg(static_cast<int>(std::lround(share * edf_.trials)))
                     .arg(edf_.trials)
                     .arg(100 * share, 0, 'f', 0),
                 {}};
}

}  // namespace commtune::ui

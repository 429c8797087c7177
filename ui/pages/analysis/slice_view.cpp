#include "ui/pages/analysis/slice_view.h"

#include <QFont>
#include <QFontMetrics>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/tuner/verdict/sweep_figures.h"
#include "ui/forms/param_field.h"
#include "ui/plot/qcustomplot.h"
#include "ui/plot/plot_style.h"
#include "ui/theme.h"

namespace commtune::ui {

namespace {

// A swept parameter's value in a run, as text (the run has it: callers check).
QString axis_value(const AnalysedRun& run, const std::string& name) {
  return QString::fromStdString(run.axis_values.at(name));
}

}  // namespace

void SliceView::draw(const SweepAnalysis& data, const std::string& param) {
  plot_->clearGraphs();
  plot_->clearItems();
  plot_->legend->setVisible(false);
  points_.clear();
  param_ = param;
  plot_->xAxis->setLabel(param.empty() ? "a slice needs a swept parameter" : QString::fromStdString(param));
  const auto slice = slice_of(data, param);
  const bool numeric = slice.numeric;
  const double lo = slice.lo, hi = slice.hi;
  std::vector<QString> categories;
  for (const auto& c : slice.categories) categories.push_back(QString::fromStdString(c));
  const Theme t = current_theme();
  auto* trials = plot_->addGraph();
  trials->setLineStyle(QCPGraph::lsNone);
  trials->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, t.series_color(0), 7));
  trials->removeFromLegend();
  for (std::size_t k = 0; k < slice.points.size(); ++k) trials->addData(slice.x[k], slice.points[k]->loss_mean);
  points_ = slice.points;
  if (slice.best) {
    auto* ring = plot_->addGraph();
    ring->setLineStyle(QCPGraph::lsNone);
    ring->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(t.series_color(1), 2), QBrush(), 13));
    ring->removeFromLegend();
    ring->addData(slice.x[*slice.best], slice.points[*slice.best]->loss_mean);
  }
  // The allreduce baseline the trials are read against: at each value it was run at, or one level.
  const auto baseline = slice_baseline(data, param);
  if (baseline.level) {
    auto* level = new QCPItemStraightLine(plot_);
    level->setObjectName("slice:baseline");
    level->point1->setCoords(0, *baseline.level);
    level->point2->setCoords(1, *baseline.level);
    level->setPen(QPen(t.muted, 1.2, Qt::DashLine));
    auto* label = new QCPItemText(plot_);
    label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(0.99, *baseline.level);
    label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
    label->setText(baseline.runs > 1 ? QString("allreduce baseline (mean of %1)").arg(baseline.runs)
                                     : QString("allreduce baseline"));
    label->setColor(t.foreground);
    label->setFont(QFont(plot_->font().family(), 8));
  } else if (!baseline.at_values.empty()) {
    auto* at = plot_->addGraph();
    at->setName("allreduce baseline");
    at->setPen(QPen(t.muted, 1.2, Qt::DashLine));
    at->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, QPen(t.muted, 1.5), QBrush(), 9));
    for (const auto& [value, loss] : baseline.at_values) {
      const auto category = std::find(slice.categories.begin(), slice.categories.end(), value);
      if (numeric) {
        if (const auto v = finite_number(QString::fromStdString(value))) at->addData(*v, loss);
      } else if (category != slice.categories.end()) {
        at->addData(static_cast<double>(category - slice.categories.begin()), loss);
      }
    }
    plot_->legend->setVisible(true);  // it names the baseline; the trials explain themselves
  }
  const bool log = numeric && lo > 0 && hi / lo > 100;
  set_log_axis(plot_->xAxis, log);
  // Categories, and a grid's numbers (up to 8, as on the parallel coordinates),
  // label the axis with their values: no rank 2.5. Drawn values get a scale.
  if (!numeric || categories.size() <= 8) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const auto labels = short_value_labels(categories);
    for (std::size_t k = 0; k < categories.size(); ++k)
      ticker->addTick(numeric ? *finite_number(categories[k]) : double(k), labels[k]);
    plot_->xAxis->setTicker(ticker);
  }
  plot_->rescaleAxes();
  if (baseline.level)
    plot_->yAxis->setRange(std::min(plot_->yAxis->range().lower, *baseline.level),
                           std::max(plot_->yAxis->range().upper, *baseline.level));
  if (log)
    plot_->xAxis->setRange(lo / 1.5, hi * 1.5);
  else
    plot_->xAxis->scaleRange(1.15);
  plot_->yAxis->scaleRange(1.15);
  widen_flat_range(plot_->yAxis);
  plot_->replot();
}

std::optional<PlotHit> SliceView::hit(const QPointF& pixel) const {
  const auto near = nearest_point(plot_, pixel);
  if (!near || near->graph != plot_->graph(0) || near->index >= static_cast<int>(points_.size()))
    return std::nullopt;
  const auto* p = points_[static_cast<std::size_t>(near->index)];
  const auto id = p->configuration();
  return PlotHit{QString("run %1 %2: %3 = %4, %5")
                     .arg(id)
                     .arg(QString::fromStdString(p->label), QString::fromStdString(param_),
                          axis_value(*p, param_), QString::fromStdString(tail_loss_text(*p))),
                 {id}};
}

}  // namespace commtune::ui

#include "ui/pages/analysis/scatter_matrix_view.h"

#include <algorithm>
#include <set>

#include "ui/forms/param_field.h"
#include "ui/plot/plot_style.h"
#include "ui/plot/qcustomplot.h"
#include "ui/theme.h"

namespace commtune::ui {

void ScatterMatrixView::draw(const ScatterMatrix& matrix) {
  matrix_ = matrix;
  panels_.clear();
  plot_->clearPlottables();
  plot_->clearItems();
  plot_->plotLayout()->clear();  // its axis rects: one per panel below
  const Theme t = current_theme();
  plot_->setBackground(t.background);
  if (matrix.columns.empty() || matrix.trials.empty()) {
    auto* empty = new QCPTextElement(plot_, "The scatter-plot matrix needs a sweep with swept parameters and trials");
    empty->setTextColor(t.foreground);
    plot_->plotLayout()->addElement(0, 0, empty);
    plot_->replot();
    return;
  }
  // A column of up to 8 numbers (a grid's: ranks, start iterations) labels its values, as the slices do:
  // no rank 2.5, no start iteration 7.5.
  std::vector<std::set<double>> values(matrix.columns.size());
  for (const auto& trial : matrix.trials)
    for (std::size_t c = 0; c < matrix.columns.size(); ++c)
      if (trial.x[c]) values[c].insert(*trial.x[c]);
  auto* columns_margin = new QCPMarginGroup(plot_);
  auto* rows_margin = new QCPMarginGroup(plot_);
  const QFont small(plot_->font().family(), 8);
  for (std::size_t r = 0; r < matrix.rows.size(); ++r)
    for (std::size_t c = 0; c < matrix.columns.size(); ++c) {
      const auto& column = matrix.columns[c];
      auto* rect = new QCPAxisRect(plot_);
      plot_->plotLayout()->addElement(static_cast<int>(r), static_cast<int>(c), rect);
      // Panels line up: a column's left edges, a row's bottoms.
      rect->setMarginGroup(QCP::msLeft | QCP::msRight, columns_margin);
      rect->setMarginGroup(QCP::msTop | QCP::msBottom, rows_margin);
      auto* x = rect->axis(QCPAxis::atBottom);
      auto* y = rect->axis(QCPAxis::atLeft);
      for (auto* axis : {x, y}) {
        style_axis(axis, t);
        axis->setTickLabelFont(small);
        axis->setLabelFont(small);
        axis->grid()->setPen(QPen(t.grid, 0, Qt::DotLine));
      }
      if (r + 1 == matrix.rows.size()) x->setLabel(short_param_name(QString::fromStdString(column.param)));
      if (c == 0) y->setLabel(QString::fromStdString(matrix.rows[r]));
      if (column.numeric) {
        set_log_axis(x, column.log);
      } else {
        QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
        std::vector<QString> names;
        for (const auto& v : column.categories) names.push_back(QString::fromStdString(v));
        const auto labels = short_value_labels(names);
        for (std::size_t k = 0; k < labels.size(); ++k) ticker->addTick(static_cast<double>(k), labels[k]);
        x->setTicker(ticker);
      }
      auto* graph = plot_->addGraph(x, y);
      graph->setLineStyle(QCPGraph::lsNone);
      graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, t.series_color(0), 5));
      Panel panel{graph, c, r, {}};
      for (std::size_t i = 0; i < matrix.trials.size(); ++i)
        if (matrix.trials[i].x[c] && matrix.trials[i].y[r]) panel.trials.push_back(i);
      // Added in x order, so that the graph's points (kept sorted by x) are the panel's trials in order.
      std::stable_sort(panel.trials.begin(), panel.trials.end(),
                       [&](std::size_t a, std::size_t b) { return *matrix.trials[a].x[c] < *matrix.trials[b].x[c]; });
      for (const auto i : panel.trials) graph->addData(*matrix.trials[i].x[c], *matrix.trials[i].y[r]);
      graph->rescaleAxes();
      if (column.log) {
        x->setRange(x->range().lower / 1.5, x->range().upper * 1.5);
      } else {
        x->scaleRange(1.2);
        if (!column.numeric) x->setRange(-0.5, std::max<double>(1, static_cast<double>(column.categories.size())) - 0.5);
      }
      y->scaleRange(1.15);
      widen_flat_range(x);
      widen_flat_range(y);
      if (column.numeric && values[c].size() <= 8) {  // after widen_flat_range, which picks a log axis's ticker
        QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
        for (const double v : values[c]) ticker->addTick(v, QString::number(v, 'g', 4));
        x->setTicker(ticker);
      }
      panels_.push_back(std::move(panel));
    }
  plot_->replot();
}

QCPGraph* ScatterMatrixView::panel(std::size_t column, std::size_t row) const {
  for (const auto& p : panels_)
    if (p.column == column && p.row == row) return p.graph;
  return nullptr;
}

std::optional<PlotHit> ScatterMatrixView::hit(const QPointF& pixel) const {
  const auto near = nearest_point(plot_, pixel);
  if (!near) return std::nullopt;
  for (const auto& p : panels_) {
    if (p.graph != near->graph || near->index >= static_cast<int>(p.trials.size())) continue;
    const auto& trial = matrix_.trials[p.trials[static_cast<std::size_t>(near->index)]];
    const auto& column = matrix_.columns[p.column];
    const auto x = *trial.x[p.column];
    const QString value = column.numeric ? QString::number(x, 'g', 6)
                                         : QString::fromStdString(column.categories[static_cast<std::size_t>(x)]);
    return PlotHit{QString("run %1: %2 = %3, %4 %5")
                       .arg(trial.run_id)
                       .arg(QString::fromStdString(column.param), value, QString::fromStdString(matrix_.rows[p.row]))
                       .arg(*trial.y[p.row], 0, 'g', 5),
                   {trial.run_id}};
  }
  return std::nullopt;
}

}  // namespace commtune::ui

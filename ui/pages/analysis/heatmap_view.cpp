#include "ui/pages/analysis/heatmap_view.h"

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

namespace commtune::ui {

namespace {

// A swept parameter's value in a run, as text (the run has it: callers check).
QString axis_value(const AnalysedRun& run, const std::string& name) {
  return QString::fromStdString(run.axis_values.at(name));
}

}  // namespace

void HeatmapView::draw(const SweepAnalysis& data, const std::string& xa, const std::string& ya) {
  plot_->clearPlottables();
  plot_->clearItems();
  for (int i = plot_->plotLayout()->elementCount() - 1; i > 0; --i)
    if (qobject_cast<QCPColorScale*>(plot_->plotLayout()->elementAt(i))) plot_->plotLayout()->removeAt(i);
  plot_->plotLayout()->simplify();
  if (data.axes.size() < 2 || xa == ya) {
    // Nothing to draw: no ticks or labels left from the sweep drawn before.
    for (auto* axis : {plot_->xAxis, plot_->yAxis}) {
      axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
      axis->setTickLabels(false);
      axis->setLabel("");
    }
    plot_->xAxis->setLabel(data.axes.size() < 2 ? "a heatmap needs a sweep over two parameters"
                                                    : "pick two parameters");
    plot_->replot();
    return;
  }
  for (auto* axis : {plot_->xAxis, plot_->yAxis}) axis->setTickLabels(true);
  const auto grid = heatmap_grid(data, xa, ya);
  if (grid.xs.empty() || grid.ys.empty()) return plot_->replot();
  if (!grid.gridded) return draw_contour(data, xa, ya);
  contour_ = false;
  std::vector<QString> xs, ys;
  for (const auto& v : grid.xs) xs.push_back(QString::fromStdString(v));
  for (const auto& v : grid.ys) ys.push_back(QString::fromStdString(v));
  auto* map = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  map->setObjectName("heatmap:cells");
  map->data()->setSize(static_cast<int>(xs.size()), static_cast<int>(ys.size()));
  // Cell k is centred on k: QCustomPlot spans n > 1 cells' centres, a single cell the whole range.
  const auto centres = [](std::size_t n) { return n > 1 ? QCPRange(0, double(n) - 1) : QCPRange(-0.5, 0.5); };
  map->data()->setRange(centres(xs.size()), centres(ys.size()));
  for (int i = 0; i < static_cast<int>(xs.size()); ++i)
    for (int j = 0; j < static_cast<int>(ys.size()); ++j) map->data()->setCell(i, j, NAN);  // no trial: blank
  cells_.clear();
  for (const auto& cell : grid.cells) {
    auto& readout = cells_[{static_cast<int>(cell.x), static_cast<int>(cell.y)}];
    readout.text = QString("%1 = %2, %3 = %4")
                       .arg(QString::fromStdString(xa), xs[cell.x], QString::fromStdString(ya), ys[cell.y]);
    for (const auto* p : cell.configurations) {
      readout.runs.push_back(p->configuration());
      readout.text += QString("\nrun %1 %2: %3")
                          .arg(p->configuration())
                          .arg(QString::fromStdString(p->label), QString::fromStdString(tail_loss_text(*p)));
    }
  }
  // The colour scale spans the cells' values: text contrast follows it.
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& cell : grid.cells)
    if (!cell.diverged()) {
      lo = std::min(lo, cell.best);
      hi = std::max(hi, cell.best);
    }
  if (!std::isfinite(lo)) lo = hi = 0;  // every trial diverged
  for (const auto& cell : grid.cells) {
    const double value = cell.diverged() ? hi : cell.best;  // a diverged cell takes the worst colour, and says so
    map->data()->setCell(static_cast<int>(cell.x), static_cast<int>(cell.y), value);
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(static_cast<double>(cell.x), static_cast<double>(cell.y));
    QString text = cell.diverged() ? QString("diverged") : QString::number(cell.best, 'g', 4);
    if (cell.configurations.size() > 1) text += QString("\nbest of %1").arg(cell.configurations.size());
    label->setText(text);
    // Viridis runs from dark purple to yellow: dark text on the light end.
    label->setColor(hi > lo && (value - lo) / (hi - lo) > 0.55 ? Qt::black : Qt::white);
    label->setFont(QFont(font_family_, 8));
  }
  auto* scale = new QCPColorScale(plot_);
  style_axis(scale->axis(), current_theme());  // its label in the theme's colour: black is lost on the dark grey
  plot_->plotLayout()->addElement(0, 1, scale);
  scale->axis()->setLabel(grid.max_seeds > 1 ? "tail loss (mean over seeds; best in the cell)" : "tail loss (best in the cell)");
  map->setColorScale(scale);
  QCPColorGradient gradient = viridis_gradient();
  gradient.setNanHandling(QCPColorGradient::nhTransparent);
  map->setGradient(gradient);
  map->setInterpolate(false);
  map->rescaleDataRange(true);
  auto ticks = [](const std::vector<QString>& values) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const auto labels = short_value_labels(values);
    for (std::size_t k = 0; k < values.size(); ++k) ticker->addTick(static_cast<double>(k), labels[k]);
    return ticker;
  };
  plot_->xAxis->setTicker(ticks(xs));
  plot_->yAxis->setTicker(ticks(ys));
  plot_->xAxis->setLabel(QString::fromStdString(xa));
  plot_->yAxis->setLabel(QString::fromStdString(ya));
  plot_->xAxis->setRange(-0.5, xs.size() - 0.5);
  plot_->yAxis->setRange(-0.5, ys.size() - 0.5);
  plot_->replot();
}

void HeatmapView::draw_contour(const SweepAnalysis& data, const std::string& xa, const std::string& ya) {
  contour_ = true;
  trials_.clear();
  struct Trial {
    double x, y, loss;
    const AnalysedRun* point;
  };
  std::vector<Trial> trials;
  std::set<std::int64_t> seen;
  for (const auto& p : data.runs)
    if (p.axis_values.count(xa) && p.axis_values.count(ya) && std::isfinite(p.loss_mean) &&
        seen.insert(p.configuration()).second)
      trials.push_back({*finite_number(axis_value(p, xa)), *finite_number(axis_value(p, ya)), p.loss_mean, &p});
  if (trials.size() < 2) return plot_->replot();
  // Each parameter on the scale the sweep drew it on (a range with `log`).
  const auto span = [&](auto member, const std::string& name) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& t : trials) lo = std::min(lo, t.*member), hi = std::max(hi, t.*member);
    return std::make_tuple(lo, hi, lo > 0 && data.log_axes.count(name) > 0);
  };
  const auto [x_lo, x_hi, x_log] = span(&Trial::x, xa);
  const auto [y_lo, y_hi, y_log] = span(&Trial::y, ya);
  const auto to_unit = [](double v, double lo, double hi, bool log) {
    if (hi <= lo) return 0.5;
    return log ? std::log(v / lo) / std::log(hi / lo) : (v - lo) / (hi - lo);
  };
  // Inverse-distance weighting (power 2) in the unit square, then 8 levels: a filled contour.
  constexpr int kCells = 60, kLevels = 8;
  double loss_lo = INFINITY, loss_hi = -INFINITY;
  for (const auto& t : trials) loss_lo = std::min(loss_lo, t.loss), loss_hi = std::max(loss_hi, t.loss);
  auto* map = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  map->setObjectName("heatmap:contour");
  map->data()->setSize(kCells, kCells);
  map->data()->setRange(QCPRange(0, 1), QCPRange(0, 1));
  for (int i = 0; i < kCells; ++i)
    for (int j = 0; j < kCells; ++j) {
      const double u = (i + 0.5) / kCells, v = (j + 0.5) / kCells;
      double weights = 0, sum = 0;
      for (const auto& t : trials) {
        const double du = u - to_unit(t.x, x_lo, x_hi, x_log), dv = v - to_unit(t.y, y_lo, y_hi, y_log);
        const double w = 1.0 / std::max(1e-9, du * du + dv * dv);
        weights += w;
        sum += w * t.loss;
      }
      const double value = sum / weights;
      const double level = loss_hi > loss_lo ? std::floor((value - loss_lo) / (loss_hi - loss_lo) * kLevels) : 0;
      map->data()->setCell(i, j, loss_lo + std::min<double>(kLevels - 1, level) * (loss_hi - loss_lo) / kLevels);
    }
  auto* scale = new QCPColorScale(plot_);
  style_axis(scale->axis(), current_theme());  // its label in the theme's colour: black is lost on the dark grey
  plot_->plotLayout()->addElement(0, 1, scale);
  scale->axis()->setLabel("tail loss (8 levels between the trials)");
  map->setColorScale(scale);
  map->setGradient(viridis_gradient());
  map->setInterpolate(false);
  map->setDataRange(QCPRange(loss_lo, loss_hi > loss_lo ? loss_hi : loss_lo + 1));
  auto* points = plot_->addGraph();
  points->setObjectName("heatmap:trials");
  points->setLineStyle(QCPGraph::lsNone);
  points->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::white, 1.5), QBrush(Qt::black), 7));
  std::sort(trials.begin(), trials.end(), [&](const Trial& a, const Trial& b) {
    return to_unit(a.x, x_lo, x_hi, x_log) < to_unit(b.x, x_lo, x_hi, x_log);
  });
  for (const auto& t : trials) {
    points->addData(to_unit(t.x, x_lo, x_hi, x_log), to_unit(t.y, y_lo, y_hi, y_log));
    trials_.push_back(t.point);
  }
  // Ticks in the parameters' own values along the unit square.
  const auto ticker = [&](double lo, double hi, bool log) {
    QSharedPointer<QCPAxisTickerText> t(new QCPAxisTickerText);
    std::vector<QString> texts;
    for (int k = 0; k <= 4; ++k)
      texts.push_back(QString::number(log ? lo * std::pow(hi / lo, k / 4.0) : lo + (hi - lo) * k / 4.0, 'g', 12));
    const auto labels = short_value_labels(texts);
    for (int k = 0; k <= 4; ++k) t->addTick(k / 4.0, labels[static_cast<std::size_t>(k)]);
    return t;
  };
  plot_->xAxis->setTicker(ticker(x_lo, x_hi, x_log));
  plot_->yAxis->setTicker(ticker(y_lo, y_hi, y_log));
  plot_->xAxis->setLabel(QString::fromStdString(xa) + (x_log ? " (log)" : ""));
  plot_->yAxis->setLabel(QString::fromStdString(ya) + (y_log ? " (log)" : ""));
  plot_->xAxis->setRange(-0.03, 1.03);
  plot_->yAxis->setRange(-0.03, 1.03);
  plot_->replot();
}

std::optional<PlotHit> HeatmapView::hit(const QPointF& pixel) const {
  if (contour_) {
    const auto near = nearest_point(plot_, pixel);
    if (!near || near->index >= static_cast<int>(trials_.size())) return std::nullopt;
    const auto* p = trials_[static_cast<std::size_t>(near->index)];
    const auto id = p->configuration();
    QStringList values;
    for (const auto& [name, value] : p->axis_values) values << QString::fromStdString(name + " = " + value);
    return PlotHit{QString("run %1 %2: %3, %4")
                       .arg(id)
                       .arg(QString::fromStdString(p->label), values.join(", "),
                            QString::fromStdString(tail_loss_text(*p))),
                   {id}};
  }
  const int i = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(pixel.x())));
  const int j = static_cast<int>(std::lround(plot_->yAxis->pixelToCoord(pixel.y())));
  const auto it = cells_.find({i, j});
  if (it == cells_.end()) return std::nullopt;
  return it->second;
}

}  // namespace commtune::ui

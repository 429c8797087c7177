#include "ui/plot/parallel_coordinates.h"

#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>

#include "ui/forms/param_field.h"
#include "ui/plot/plot_readout.h"
#include "ui/plot/plot_style.h"
#include "ui/plot/qcustomplot.h"
#include "ui/theme.h"

namespace commtune::ui {

namespace {

constexpr double kAxisGrip = 0.25;  // how far from an axis (in axis spacings) a drag still brushes it

}  // namespace

ParallelCoordinates::ParallelCoordinates(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot(this);
  plot_->setObjectName("plot:parallel");
  plot_->setMinimumSize(320, 220);
  plot_->yAxis->setVisible(false);
  plot_->yAxis->setRange(-0.08, 1.08);
  plot_->xAxis->grid()->setVisible(false);
  // The values' labels above the lines, which pass behind them.
  plot_->addLayer("labels", plot_->layer("main"), QCustomPlot::limAbove);
  // What the colours mean: viridis over the tail loss, as line_colour() draws it.
  colour_scale_ = new QCPColorScale(plot_);
  colour_scale_->setType(QCPAxis::atRight);
  colour_scale_->setBarWidth(10);
  colour_scale_->axis()->setLabel(colour_name_);
  colour_scale_->setRangeDrag(false);
  colour_scale_->setRangeZoom(false);
  plot_->plotLayout()->addElement(0, 1, colour_scale_);
  auto* margins = new QCPMarginGroup(plot_);
  plot_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  colour_scale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  // Hovering a line where it crosses an axis reads its run's values (a click there brushes, so it opens nothing).
  readout_ = new PlotReadout(plot_, [this](const QPointF& at) { return line_hit(at); });
  connect(plot_, &QCustomPlot::mousePress, this, &ParallelCoordinates::on_press);
  connect(plot_, &QCustomPlot::mouseMove, this, &ParallelCoordinates::on_move);
  connect(plot_, &QCustomPlot::mouseRelease, this, &ParallelCoordinates::on_release);
  apply_theme(current_theme());
}

void ParallelCoordinates::set_data(const std::vector<QString>& axes, const std::vector<Line>& lines) {
  const bool same_axes = axes == axes_;
  axes_ = axes;
  lines_ = lines;
  if (!same_axes) brushes_.assign(axes_.size(), std::nullopt);
  scales_.assign(axes_.size(), Scale{});
  positions_.assign(lines_.size(), std::vector<std::optional<double>>(axes_.size()));
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    auto& scale = scales_[a];
    std::vector<double> numbers;
    std::vector<QString> texts;
    for (const auto& line : lines_) {
      const auto& text = line.values[a];
      if (text.isEmpty()) continue;
      if (const auto v = finite_number(text))
        numbers.push_back(*v);
      else
        scale.numeric = false;
      if (std::find(texts.begin(), texts.end(), text) == texts.end()) texts.push_back(text);
    }
    if (scale.numeric && !numbers.empty()) {
      scale.lo = *std::min_element(numbers.begin(), numbers.end());
      scale.hi = *std::max_element(numbers.begin(), numbers.end());
      scale.log = scale.lo > 0 && scale.hi / scale.lo > 100;
    } else {
      scale.numeric = false;
      std::sort(texts.begin(), texts.end());
      scale.categories = texts;
    }
    for (std::size_t l = 0; l < lines_.size(); ++l) {
      const auto& text = lines_[l].values[a];
      if (text.isEmpty()) continue;
      const auto v = finite_number(text);
      if (!scale.numeric) {
        const auto index = std::find(scale.categories.begin(), scale.categories.end(), text) - scale.categories.begin();
        positions_[l][a] = scale.categories.size() > 1 ? double(index) / double(scale.categories.size() - 1) : 0.5;
      } else if (v) {
        const double lo = scale.log ? std::log(scale.lo) : scale.lo, hi = scale.log ? std::log(scale.hi) : scale.hi;
        const double x = scale.log ? std::log(*v) : *v;
        positions_[l][a] = hi > lo ? (x - lo) / (hi - lo) : 0.5;
      }
    }
  }
  redraw();
}

std::optional<double> ParallelCoordinates::position(std::size_t line, std::size_t axis) const {
  return positions_.at(line).at(axis);
}

void ParallelCoordinates::set_brush(int axis, double lo, double hi) {
  if (axis < 0 || axis >= static_cast<int>(axes_.size())) return;
  brushes_[static_cast<std::size_t>(axis)] = std::make_pair(std::min(lo, hi), std::max(lo, hi));
  redraw();
  Q_EMIT selection_changed();
}

void ParallelCoordinates::clear_brushes() {
  brushes_.assign(axes_.size(), std::nullopt);
  redraw();
  Q_EMIT selection_changed();
}

bool ParallelCoordinates::matches(std::size_t line) const {
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    if (!brushes_[a]) continue;
    const auto& p = positions_[line][a];
    if (!p || *p < brushes_[a]->first || *p > brushes_[a]->second) return false;
  }
  return true;
}

std::vector<std::int64_t> ParallelCoordinates::matching_runs() const {
  std::vector<std::int64_t> out;
  for (std::size_t l = 0; l < lines_.size(); ++l)
    if (matches(l)) out.push_back(lines_[l].run_id);
  return out;
}

void ParallelCoordinates::apply_theme(const Theme& theme) {
  style_plot(plot_, theme);
  style_axis(colour_scale_->axis(), theme);
  redraw();
}

void ParallelCoordinates::set_colour_name(const QString& name) {
  colour_name_ = name;
  colour_scale_->axis()->setLabel(name);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

std::optional<std::pair<double, double>> ParallelCoordinates::colour_range() const {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& l : lines_)
    if (std::isfinite(l.colour_value)) {
      lo = std::min(lo, l.colour_value);
      hi = std::max(hi, l.colour_value);
    }
  if (!(lo <= hi)) return std::nullopt;
  return std::make_pair(lo, hi);
}

void ParallelCoordinates::redraw() {
  plot_->clearPlottables();
  plot_->clearItems();
  drag_rect_ = nullptr;
  const Theme theme = current_theme();
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (std::size_t a = 0; a < axes_.size(); ++a) ticker->addTick(static_cast<double>(a), axes_[a]);
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setRange(-0.4, std::max<double>(1, static_cast<double>(axes_.size()) - 0.6));

  for (std::size_t l : drawing_order()) {
    auto* curve = new QCPCurve(plot_->xAxis, plot_->yAxis);
    // A run without a parameter (another hook's) goes straight from the axis before to the one after.
    QVector<QCPCurveData> points;
    for (std::size_t a = 0; a < axes_.size(); ++a)
      if (positions_[l][a])
        points.append(QCPCurveData(static_cast<double>(points.size()), static_cast<double>(a), *positions_[l][a]));
    curve->data()->set(points, true);
    const bool selected = matches(l);
    QColor colour = line_colour(l);
    if (!selected) colour = theme.muted, colour.setAlpha(50);
    curve->setPen(QPen(colour, selected ? 1.6 : 1));
    curve->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, colour, selected ? 5 : 3));
    curve->setName(QString::number(lines_[l].run_id));
  }
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    const double x = static_cast<double>(a);
    auto* axis_line = new QCPItemLine(plot_);
    axis_line->start->setCoords(x, 0);
    axis_line->end->setCoords(x, 1);
    axis_line->setPen(QPen(theme.foreground, 1.2));
    // Left of the axis, clear of its points, over the lines arriving there on a patch of background: from the
    // axis rightwards, the points and the lines leaving them would cover the values.
    auto label = [&](double y, const QString& text) {
      auto* t = new QCPItemText(plot_);
      t->setLayer("labels");
      t->position->setParentAnchorX(axis_line->start);  // 6 px left of the axis, at any width
      t->position->setTypeX(QCPItemPosition::ptAbsolute);
      t->position->setCoords(-6, y);
      t->setPositionAlignment(Qt::AlignRight | Qt::AlignVCenter);
      t->setPadding(QMargins(2, 0, 2, 0));
      t->setText(text);
      t->setColor(theme.foreground);
      QColor patch = theme.background;
      patch.setAlpha(200);
      t->setBrush(patch);
      t->setFont(QFont(font().family(), 7));
    };
    const auto& s = scales_[a];
    if (s.numeric) {
      for (const auto& [at, text] : numeric_labels(a)) label(at, text);
    } else {
      for (std::size_t c = 0; c < s.categories.size(); ++c)
        label(s.categories.size() > 1 ? double(c) / double(s.categories.size() - 1) : 0.5, s.categories[c]);
    }
    if (brushes_[a]) {
      auto* rect = new QCPItemRect(plot_);
      rect->topLeft->setCoords(x - 0.06, brushes_[a]->second);
      rect->bottomRight->setCoords(x + 0.06, brushes_[a]->first);
      rect->setPen(QPen(theme.foreground));
      QColor fill = theme.foreground;
      fill.setAlpha(40);
      rect->setBrush(fill);
    }
  }
  // The colour legend: the gradient line_colour() draws with, over the same range.
  const auto range = colour_range();
  colour_scale_->setVisible(range.has_value());
  if (range) {
    const auto gradient = viridis_gradient();
    colour_scale_->setGradient(theme.dark ? gradient.inverted() : gradient);
    colour_scale_->setDataRange(QCPRange(range->first, range->second > range->first ? range->second : range->first + 1));
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

std::vector<std::pair<double, QString>> ParallelCoordinates::numeric_labels(std::size_t axis) const {
  // Every value of a grid's axis (up to 8); else five evenly spaced along it.
  const auto& s = scales_[axis];
  std::vector<double> values;
  for (const auto& line : lines_)
    if (const auto v = finite_number(line.values[axis]);
        v && std::find(values.begin(), values.end(), *v) == values.end())
      values.push_back(*v);
  if (values.size() > 8) {
    values.clear();
    for (int k = 0; k <= 4; ++k) {
      const double t = k / 4.0;
      values.push_back(s.log ? s.lo * std::pow(s.hi / s.lo, t) : s.lo + t * (s.hi - s.lo));
    }
  }
  std::sort(values.begin(), values.end());
  std::vector<QString> texts;
  for (const double v : values) texts.push_back(QString::number(v, 'g', 12));
  texts = short_value_labels(texts);
  std::vector<std::pair<double, QString>> out;
  for (std::size_t k = 0; k < values.size(); ++k) {
    const double lo = s.log ? std::log(s.lo) : s.lo, hi = s.log ? std::log(s.hi) : s.hi;
    const double x = s.log ? std::log(values[k]) : values[k];
    out.emplace_back(hi > lo ? (x - lo) / (hi - lo) : 0.5, texts[k] + (s.log && k + 1 == values.size() ? " (log)" : ""));
  }
  return out;
}

QColor ParallelCoordinates::line_colour(std::size_t line) const {
  // Viridis over the finite values' range, the best (lowest) end the one
  // that stands out on the background: dark purple on light, yellow on dark.
  const double value = lines_[line].colour_value;
  const auto finite = colour_range();
  if (!std::isfinite(value) || !finite) return QColor(0xd9, 0x53, 0x4f);  // diverged
  const auto [lo, hi] = *finite;
  QCPColorGradient gradient = viridis_gradient();  // color() is not const
  if (current_theme().dark) gradient = gradient.inverted();
  return QColor(gradient.color(value, QCPRange(lo, hi > lo ? hi : lo + 1)));
}

std::vector<std::size_t> ParallelCoordinates::drawing_order() const {
  // The best lines last, on top of the rest.
  std::vector<std::size_t> order(lines_.size());
  for (std::size_t l = 0; l < order.size(); ++l) order[l] = l;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const double va = lines_[a].colour_value, vb = lines_[b].colour_value;
    return (std::isfinite(va) ? va : INFINITY) > (std::isfinite(vb) ? vb : INFINITY);
  });
  return order;
}

std::optional<PlotHit> ParallelCoordinates::line_hit(const QPointF& pixel) const {
  std::optional<std::pair<double, std::size_t>> best;  // (distance, line)
  for (std::size_t l = 0; l < lines_.size(); ++l)
    for (std::size_t a = 0; a < axes_.size(); ++a) {
      if (!positions_[l][a]) continue;
      const double dx = plot_->xAxis->coordToPixel(static_cast<double>(a)) - pixel.x();
      const double dy = plot_->yAxis->coordToPixel(*positions_[l][a]) - pixel.y();
      const double distance = std::hypot(dx, dy);
      if (distance <= 6 && (!best || distance < best->first)) best = std::make_pair(distance, l);
    }
  if (!best) return std::nullopt;
  const auto& line = lines_[best->second];
  QStringList values;
  for (std::size_t a = 0; a < axes_.size(); ++a)
    if (!line.values[a].isEmpty()) values << axes_[a] + " " + line.values[a];
  return PlotHit{QString("run %1: %2").arg(line.run_id).arg(values.join(", ")), {line.run_id}};
}

void ParallelCoordinates::on_press(QMouseEvent* event) {
  const double x = plot_->xAxis->pixelToCoord(event->position().x());
  const double axis = std::round(x);
  brushing_axis_ = std::abs(x - axis) < kAxisGrip && axis >= 0 && axis < static_cast<double>(axes_.size())
                       ? static_cast<int>(axis)
                       : -1;
  brush_start_ = std::clamp(plot_->yAxis->pixelToCoord(event->position().y()), 0.0, 1.0);
}

void ParallelCoordinates::on_move(QMouseEvent* event) {
  if (brushing_axis_ < 0 || !(event->buttons() & Qt::LeftButton)) return;
  const double y = std::clamp(plot_->yAxis->pixelToCoord(event->position().y()), 0.0, 1.0);
  if (!drag_rect_) {
    drag_rect_ = new QCPItemRect(plot_);
    drag_rect_->setPen(QPen(current_theme().foreground, 1, Qt::DashLine));
  }
  drag_rect_->topLeft->setCoords(brushing_axis_ - 0.06, std::max(y, brush_start_));
  drag_rect_->bottomRight->setCoords(brushing_axis_ + 0.06, std::min(y, brush_start_));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void ParallelCoordinates::on_release(QMouseEvent* event) {
  if (brushing_axis_ < 0) return;
  const int axis = std::exchange(brushing_axis_, -1);
  const double y = std::clamp(plot_->yAxis->pixelToCoord(event->position().y()), 0.0, 1.0);
  if (std::abs(y - brush_start_) < 0.02) {  // a click: this axis takes every value again
    brushes_[static_cast<std::size_t>(axis)].reset();
    redraw();
    Q_EMIT selection_changed();
    return;
  }
  set_brush(axis, brush_start_, y);
}

}  // namespace commtune::ui

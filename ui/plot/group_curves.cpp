#include "ui/plot/group_curves.h"

#include <algorithm>

#include "ui/plot/plot_style.h"
#include "ui/plot/qcustomplot.h"

namespace commtune::ui {

GroupCurves::GroupCurves(QCustomPlot* plot, std::size_t drawn_points) : plot_(plot), drawn_points_(drawn_points) {}

void GroupCurves::set(std::vector<SeedGroup> groups) {
  for (auto& g : groups_)
    for (auto* graph : {g.mean, g.upper, g.lower}) plot_->removeGraph(graph);
  groups_.clear();
  for (auto& group : groups) {
    Group g{GroupSeries(std::move(group)),
            plot_->addGraph(),
            plot_->addGraph(),
            plot_->addGraph(),
            MinMaxSeries(drawn_points_),
            MinMaxSeries(drawn_points_ / 8),
            MinMaxSeries(drawn_points_ / 8)};
    g.upper->setChannelFillGraph(g.lower);
    g.mean->setName(QString::fromStdString(group_label(g.series.group())));
    for (auto* edge : {g.upper, g.lower}) edge->removeFromLegend();
    groups_.push_back(std::move(g));
  }
}

std::optional<std::size_t> GroupCurves::group_of(std::int64_t run_id) const {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    const auto& runs = groups_[i].series.group().runs;
    if (std::find(runs.begin(), runs.end(), run_id) != runs.end()) return i;
  }
  return std::nullopt;
}

void GroupCurves::set_visible(const std::function<bool(std::int64_t)>& run_visible) {
  for (auto& g : groups_) {
    const auto& runs = g.series.group().runs;
    const bool shown = std::any_of(runs.begin(), runs.end(), run_visible);
    for (auto* graph : {g.mean, g.upper, g.lower}) graph->setVisible(shown);
  }
}

void GroupCurves::restyle(const std::function<QColor(std::int64_t)>& colour_of, std::int64_t highlighted_run) {
  const auto picked = group_of(highlighted_run);
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    auto& g = groups_[i];
    QColor colour = colour_of(g.series.group().runs.front());
    if (highlighted_run >= 0 && picked != i) colour.setAlpha(45);
    // 1 px unless picked out: wider antialiased lines take Qt's slow raster path.
    g.mean->setPen(QPen(colour, picked == i ? 2.5 : 1));
    QColor band = colour;
    band.setAlpha(std::min(colour.alpha(), 50));
    for (auto* edge : {g.upper, g.lower}) edge->setPen(Qt::NoPen);
    g.upper->setBrush(band);
    // Antialiased, ten translucent bands took the loss plot's redraw to 20 ms (bench/plot_bench, grouped).
    g.upper->setAntialiasedFill(false);
  }
}

void GroupCurves::restart(std::int64_t run_id) {
  if (const auto i = group_of(run_id)) groups_[*i].series.restart();
}

void GroupCurves::draw(const SeriesModel& model, bool by_wall) {
  for (auto& g : groups_) {
    auto update = g.series.advance(model, by_wall);
    if (update.restarted) {
      g.means = MinMaxSeries(drawn_points_);
      g.uppers = g.lowers = MinMaxSeries(drawn_points_ / 8);
    } else if (update.points.empty()) {
      continue;
    }
    for (const auto& p : update.points) {
      g.means.append(p.x, p.mean);
      g.uppers.append(p.x, p.mean + p.sd);
      g.lowers.append(p.x, p.mean - p.sd);
    }
    set_graph_data(g.mean, g.means);
    set_graph_data(g.upper, g.uppers);
    set_graph_data(g.lower, g.lowers);
  }
}

std::optional<PlotHit> GroupCurves::hit(const NearestPoint& near, bool by_wall, bool smoothed) const {
  for (const auto& g : groups_) {
    if (near.graph != g.mean && near.graph != g.upper && near.graph != g.lower) continue;
    // The step aggregated nearest the point's key (the band is drawn coarser than the mean).
    const auto& xs = g.means.x();
    if (xs.empty()) return std::nullopt;
    auto it = std::lower_bound(xs.begin(), xs.end(), near.key);
    if (it == xs.end() || (it != xs.begin() && near.key - *(it - 1) < *it - near.key)) --it;
    const auto i = static_cast<std::size_t>(it - xs.begin());
    const double mean = g.means.y()[i];
    const double sd = g.uppers.y()[i] - mean;
    const QString at = by_wall ? QString("%1 s").arg(xs[i], 0, 'f', 1) : QString("step %1").arg(xs[i], 0, 'f', 0);
    return PlotHit{QString("%1: %2, mean loss %3 (sd %4)%5")
                       .arg(QString::fromStdString(group_label(g.series.group())), at)
                       .arg(mean, 0, 'g', 5)
                       .arg(sd, 0, 'g', 3)
                       .arg(smoothed ? " (smoothed)" : ""),
                   g.series.group().runs};
  }
  return std::nullopt;
}

}  // namespace commtune::ui

// The loss plot's seed groups as drawn: each group's mean curve with its band
// of one standard deviation, what the pointer reads on them (the group's
// label, seed count, mean and sd at the step) and the runs a click on them
// opens. RunPlots owns one and feeds it the series model's groups.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <QColor>

#include "ui/plot/minmax_series.h"
#include "ui/plot/plot_readout.h"
#include "ui/plot/series_model.h"

class QCustomPlot;
class QCPGraph;

namespace commtune::ui {

class GroupCurves {
 public:
  // `drawn_points`: the most a mean curve draws (min/max pairs beyond).
  GroupCurves(QCustomPlot* plot, std::size_t drawn_points);
  // Replaces the groups drawn (their graphs go from the plot).
  void set(std::vector<SeedGroup> groups);
  // Forgets the groups whose graphs the plot cleared itself.
  void forget() { groups_.clear(); }
  bool empty() const { return groups_.empty(); }
  std::size_t size() const { return groups_.size(); }
  const SeedGroup& group(std::size_t i) const { return groups_.at(i).series.group(); }
  QCPGraph* mean(std::size_t i) const { return groups_.at(i).mean; }
  QCPGraph* band(std::size_t i, bool upper) const { return upper ? groups_.at(i).upper : groups_.at(i).lower; }
  // The group a run is drawn in, if any.
  std::optional<std::size_t> group_of(std::int64_t run_id) const;
  // A group is shown while any of its runs is.
  void set_visible(const std::function<bool(std::int64_t run)>& run_visible);
  // Colours from each group's first run; a highlighted group thick, the others faded.
  void restyle(const std::function<QColor(std::int64_t run)>& colour_of, std::int64_t highlighted_run);
  // From the first step at the next draw() (a replica's points were replaced).
  void restart(std::int64_t run_id);
  // The steps every replica has reached since the last call.
  void draw(const SeriesModel& model, bool by_wall);
  // What a point of one of the groups' graphs reads, and the group's runs; nothing for another graph.
  std::optional<PlotHit> hit(const NearestPoint& near, bool by_wall, bool smoothed) const;

 private:
  struct Group {
    GroupSeries series;
    QCPGraph* mean;
    QCPGraph* upper;
    QCPGraph* lower;
    // The band at an eighth of the curve's resolution: filling ten translucent
    // bands is the frame's costliest part.
    MinMaxSeries means, uppers, lowers;
  };
  QCustomPlot* plot_;
  std::size_t drawn_points_;
  std::vector<Group> groups_;
};

}  // namespace commtune::ui

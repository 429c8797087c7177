// What every page's plots share: how a plot is made and coloured, the
// colour scale of drawn values, log axes, and axes that stay readable
// around a near-constant series.
#pragma once

#include <QString>

#include "ui/theme.h"

class QCustomPlot;
class QCPAxis;
class QCPGraph;
class QCPColorGradient;
class QWidget;

namespace commtune::ui {

class MinMaxSeries;

// A titled plot that drags and zooms; "plot:<title>" as its object name.
QCustomPlot* make_plot(const QString& title, const QString& y_label, QWidget* parent);
// Colours a plot (background, axes, grid, title, legend) for the theme.
void style_plot(QCustomPlot* plot, const Theme& theme);
// One axis in the theme's colours (a colour scale's too, which style_plot does not reach).
void style_axis(QCPAxis* axis, const Theme& theme);
// Viridis, dark purple (low) to yellow (high): ordered in lightness, readable
// in both themes, and never white, so the top of a scale stays on it.
QCPColorGradient viridis_gradient();
// Switches a value axis between linear and log scale (with its ticker).
void set_log_axis(QCPAxis* axis, bool log);
// Widens an axis whose data barely varies, so a near-constant series gets a
// few distinct tick labels (not 0.999996..1 or 5.29208, 5.29208, 5.29209);
// on a log axis, keeps the data's extremes off the axis lines.
void widen_flat_range(QCPAxis* axis);
// A graph's data: a series' drawn (reduced) points.
void set_graph_data(QCPGraph* graph, const MinMaxSeries& series);

}  // namespace commtune::ui

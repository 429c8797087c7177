// A sweep as parallel coordinates: one vertical axis per swept parameter and
// per result (tail loss, ms and MB per step), one line per trial, coloured by
// its tail loss (the best stand out: dark on a light theme, light on a dark
// one, drawn on top). A run without a parameter (another hook's) passes that
// axis by. Drag along an axis to brush a range: trials
// outside every brush fade, and matching_runs() is what the table beside it
// lists; a click on an axis clears its brush. A colour bar beside the axes
// is the colours' legend; values are labelled left of their axis. Numbers spanning more than two
// decades sit on a log scale; text values are spaced evenly in order.
#pragma once

#include <QColor>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <optional>
#include <vector>

#include "ui/plot/plot_readout.h"

class QCustomPlot;
class QCPItemRect;
class QCPColorScale;
class QMouseEvent;

namespace commtune::ui {

struct Theme;

class ParallelCoordinates : public QWidget {
  Q_OBJECT
 public:
  struct Line {
    std::int64_t run_id = 0;
    std::vector<QString> values;  // one per axis, "" where the run has none
    double colour_value = 0;      // what the colour shows (the tail loss)
  };
  explicit ParallelCoordinates(QWidget* parent = nullptr);

  void set_data(const std::vector<QString>& axes, const std::vector<Line>& lines);
  // Keeps the lines whose value on `axis`, scaled to [0, 1] along it, is in [lo, hi].
  void set_brush(int axis, double lo, double hi);
  void clear_brushes();
  std::vector<std::int64_t> matching_runs() const;
  // Where a line crosses an axis, in [0, 1] (nullopt: the run has no value there).
  std::optional<double> position(std::size_t line, std::size_t axis) const;
  QCustomPlot* plot() const { return plot_; }
  const std::vector<Line>& lines() const { return lines_; }
  QColor line_colour(std::size_t line) const;  // as drawn when it matches the brushes
  PlotReadout* readout() const { return readout_; }
  // A numeric axis's labels: (position in [0, 1], text).
  std::vector<std::pair<double, QString>> numeric_labels(std::size_t axis) const;
  void apply_theme(const Theme& theme);
  // What the colour shows, as the colour legend names it ("tail loss").
  void set_colour_name(const QString& name);

 Q_SIGNALS:
  void selection_changed();

 private:
  struct Scale {
    bool numeric = true, log = false;
    double lo = 0, hi = 1;
    std::vector<QString> categories;  // for text values, in order
  };
  void redraw();
  std::vector<std::size_t> drawing_order() const;
  std::optional<PlotHit> line_hit(const QPointF& pixel) const;
  bool matches(std::size_t line) const;
  std::optional<std::pair<double, double>> colour_range() const;  // of the finite colour values
  void on_press(QMouseEvent* event);
  void on_move(QMouseEvent* event);
  void on_release(QMouseEvent* event);

  QCustomPlot* plot_;
  std::vector<QString> axes_;
  std::vector<Line> lines_;
  std::vector<Scale> scales_;
  std::vector<std::vector<std::optional<double>>> positions_;  // [line][axis]
  std::vector<std::optional<std::pair<double, double>>> brushes_;
  int brushing_axis_ = -1;
  double brush_start_ = 0;
  QCPItemRect* drag_rect_ = nullptr;
  PlotReadout* readout_ = nullptr;
  QCPColorScale* colour_scale_ = nullptr;  // the colour legend
  QString colour_name_ = "tail loss";
};

}  // namespace commtune::ui

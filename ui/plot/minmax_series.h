// A growing (x, y) series and the reduced copy a plot draws. Up to
// `max_points` the copy is the series itself; beyond, each run of `stride`
// consecutive points is drawn as its minimum and maximum (in x order), so a
// million-point curve keeps its envelope, spikes included, in a few thousand
// points. Appending is amortised O(1): the copy is rebuilt only when the
// stride doubles. No Qt here: the dashboard and the benchmark share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace commtune::ui {

class MinMaxSeries {
 public:
  explicit MinMaxSeries(std::size_t max_points = 8192);

  // x must not decrease.
  void append(double x, double y);

  std::size_t size() const { return x_.size(); }
  const std::vector<double>& x() const { return x_; }
  const std::vector<double>& y() const { return y_; }
  std::size_t stride() const { return stride_; }

  // The points to draw (at most max_points).
  const std::vector<double>& drawn_x() const { return stride_ == 1 ? x_ : reduced_x_; }
  const std::vector<double>& drawn_y() const { return stride_ == 1 ? y_ : reduced_y_; }
  // Changes whenever the drawn points change.
  std::uint64_t revision() const { return revision_; }

 private:
  void rebuild();
  void reduce_bucket(std::size_t first);  // appends the bucket starting at `first` (complete or not)

  std::size_t max_points_;
  std::size_t stride_ = 1;
  std::vector<double> x_, y_;
  std::vector<double> reduced_x_, reduced_y_;
  std::size_t reduced_buckets_ = 0;  // complete buckets in the reduced copy
  bool partial_tail_ = false;        // whether the copy ends with an incomplete bucket's points
  std::size_t tail_points_ = 0;      // how many points that incomplete bucket put in the copy
  std::uint64_t revision_ = 0;
};

}  // namespace commtune::ui

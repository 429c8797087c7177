#include "ui/plot/minmax_series.h"

#include <algorithm>

namespace commtune::ui {

MinMaxSeries::MinMaxSeries(std::size_t max_points) : max_points_(std::max<std::size_t>(max_points, 16)) {}

void MinMaxSeries::append(double x, double y) {
  x_.push_back(x);
  y_.push_back(y);
  ++revision_;
  if (stride_ == 1) {
    if (x_.size() > max_points_) {
      stride_ = 2;
      while (2 * (x_.size() / stride_ + 1) > max_points_) stride_ *= 2;
      rebuild();
    }
    return;
  }
  // Drop the incomplete bucket's points, then add what the buckets now hold.
  if (partial_tail_) {
    reduced_x_.resize(reduced_x_.size() - tail_points_);
    reduced_y_.resize(reduced_y_.size() - tail_points_);
    partial_tail_ = false;
  }
  const std::size_t first = reduced_buckets_ * stride_;
  reduce_bucket(first);
  if (2 * (reduced_buckets_ + (partial_tail_ ? 1 : 0)) > max_points_) {
    stride_ *= 2;
    rebuild();
  }
}

void MinMaxSeries::rebuild() {
  reduced_x_.clear();
  reduced_y_.clear();
  reduced_buckets_ = 0;
  partial_tail_ = false;
  for (std::size_t first = 0; first < x_.size(); first += stride_) reduce_bucket(first);
}

void MinMaxSeries::reduce_bucket(std::size_t first) {
  const std::size_t last = std::min(first + stride_, x_.size());
  if (first >= last) return;
  std::size_t lo = first, hi = first;
  for (std::size_t i = first + 1; i < last; ++i) {
    if (y_[i] < y_[lo]) lo = i;
    if (y_[i] > y_[hi]) hi = i;
  }
  const std::size_t a = std::min(lo, hi), b = std::max(lo, hi);
  reduced_x_.push_back(x_[a]);
  reduced_y_.push_back(y_[a]);
  std::size_t added = 1;
  if (b != a) {
    reduced_x_.push_back(x_[b]);
    reduced_y_.push_back(y_[b]);
    ++added;
  }
  if (last - first == stride_) {
    ++reduced_buckets_;
  } else {
    partial_tail_ = true;
    tail_points_ = added;
  }
}

}  // namespace commtune::ui

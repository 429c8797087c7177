// The newest per-bucket statistics of one run (rank 0's): a row per bucket,
// a column per statistic. Statistics arrive for every run; the table shows
// the chosen run's, rebuilt at refresh() rather than on every arrival.
#pragma once

#include <QTableWidget>
#include <cstdint>
#include <map>

#include "ui/live/live_feed.h"

namespace commtune::ui {

class BucketTable final : public QTableWidget {
  Q_OBJECT
 public:
  explicit BucketTable(QWidget* parent = nullptr);
  void set_stats(const BucketStats& stats);  // a run's newest, replacing its older ones
  void show_run(std::int64_t run_id);
  void forget();   // every run's statistics, and the rows shown
  void refresh();  // rebuilds the rows when statistics came or the run changed since the last call

 private:
  std::map<std::int64_t, BucketStats> stats_;
  std::int64_t run_id_ = 0;
  bool changed_ = false;
};

}  // namespace commtune::ui

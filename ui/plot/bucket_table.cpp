#include "ui/plot/bucket_table.h"

#include <QHeaderView>
#include <QStringList>

namespace commtune::ui {

BucketTable::BucketTable(QWidget* parent) : QTableWidget(parent) {
  setObjectName("plots:buckets");
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  verticalHeader()->setVisible(false);
  setToolTip("The newest per-bucket statistics of the chosen run (rank 0)");
}

void BucketTable::set_stats(const BucketStats& stats) {
  stats_[stats.run_id] = stats;
  changed_ = true;
}

void BucketTable::show_run(std::int64_t run_id) {
  run_id_ = run_id;
  changed_ = true;
}

void BucketTable::forget() {
  stats_.clear();
  clear();
  setRowCount(0);
  setColumnCount(0);
}

void BucketTable::refresh() {
  if (!changed_) return;
  changed_ = false;
  const auto it = stats_.find(run_id_);
  clear();
  setRowCount(0);
  setColumnCount(0);
  if (it == stats_.end()) return;
  QStringList columns{"bucket"};
  for (const auto& [bucket, values] : it->second.values)
    for (const auto& [name, value] : values)
      if (!columns.contains(QString::fromStdString(name))) columns << QString::fromStdString(name);
  setColumnCount(static_cast<int>(columns.size()));
  setHorizontalHeaderLabels(columns);
  setRowCount(static_cast<int>(it->second.values.size()));
  int row = 0;
  for (const auto& [bucket, values] : it->second.values) {
    setItem(row, 0, new QTableWidgetItem(QString::number(bucket)));
    for (const auto& [name, value] : values)
      setItem(row, static_cast<int>(columns.indexOf(QString::fromStdString(name))),
              new QTableWidgetItem(QString::number(value, 'g', 5)));
    ++row;
  }
  horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
}

}  // namespace commtune::ui

// The list of runs beside the plots, made for sweeps of 30+ trials: a row per
// run with its colour, the parameter values its label sets as columns
// (numbers sorted as numbers) and the rest of its label. Check a row to show
// its run, double-click to show it alone, hover to pick it out; the plots
// act on what the list reports.
#pragma once

#include <QStringList>
#include <QTreeWidget>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "ui/plot/series_model.h"

class QColor;

namespace commtune::ui {

class TrialList final : public QTreeWidget {
  Q_OBJECT
 public:
  explicit TrialList(QWidget* parent = nullptr);
  // `label` as "12 matrix_approximation_rank=2 lr=0.05": its parameter=value
  // words become columns, unless `values` gives them.
  void add_run(std::int64_t run_id, const QString& label, const std::vector<std::pair<QString, QString>>& values);
  void set_checked(std::int64_t run_id, bool checked);
  void set_colour(std::int64_t run_id, const QColor& colour);
  void forget();  // every row, and the parameters' columns
  // Seed groups listed as one row each, "label (n seeds)", in place of their
  // runs' rows (checking it shows or hides all of them); none: a row per run.
  void set_groups(const std::vector<SeedGroup>& groups);

 Q_SIGNALS:
  // A row changed (its box, its text or its colour): whether it is checked now.
  void run_checked(qint64 run_id, bool checked);
  // A double-click, or the menu's "Show only this run": the row's run, or its group's.
  void solo_requested(const std::vector<std::int64_t>& run_ids);
  void show_all_requested();
  void hide_all_requested();
  void hovered(qint64 run_id);  // -1: the pointer left the runs

 protected:
  void leaveEvent(QEvent* event) override;

 private:
  void update_header();
  QTreeWidgetItem* group_item_of(std::int64_t run_id) const;
  void sync_group_check(QTreeWidgetItem* group);

  QStringList keys_;  // the parameters the labels name, one column each
  std::map<std::int64_t, QTreeWidgetItem*> items_;
  std::vector<QTreeWidgetItem*> group_items_;
};

}  // namespace commtune::ui

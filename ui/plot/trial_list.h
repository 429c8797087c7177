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

 Q_SIGNALS:
  // A row changed (its box, its text or its colour): whether it is checked now.
  void run_checked(qint64 run_id, bool checked);
  void solo_requested(qint64 run_id);  // a double-click, or the menu's "Show only this run"
  void show_all_requested();
  void hide_all_requested();
  void hovered(qint64 run_id);  // -1: the pointer left the runs

 protected:
  void leaveEvent(QEvent* event) override;

 private:
  void update_header();

  QStringList keys_;  // the parameters the labels name, one column each
  std::map<std::int64_t, QTreeWidgetItem*> items_;
};

}  // namespace commtune::ui

// The run browser: every stored run, filtered by text and status, sorted by
// any column. Opening runs shows their plots (the dashboard's, from the
// store) side by side and the parameters in which they differ; Export
// leads to the export dialog. Reads happen off the UI thread.
#pragma once

#include <QWidget>
#include <cstdint>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;
class QTableWidget;
class QCheckBox;

namespace commtune::ui {

class RunPlots;

class RunsPage : public QWidget {
  Q_OBJECT
 public:
  RunsPage(QString store_path, QWidget* parent = nullptr);

  void refresh();
  // Selects these runs and shows them (plots and parameter diff).
  void open_runs(const std::vector<std::int64_t>& run_ids);
  std::vector<std::int64_t> selected_runs() const;
  int visible_runs() const;  // rows that pass the filters
  QLineEdit* search() const { return search_; }
  RunPlots* plots() const { return plots_; }
  bool loading() const { return pending_ > 0; }
  void export_selected();

 Q_SIGNALS:
  void loaded(int runs);

 private:
  void show_diff(const std::vector<std::int64_t>& ids);

  QString store_path_;
  QStandardItemModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QLineEdit* search_;
  QComboBox* status_;
  QLabel* empty_;
  QPushButton* open_;
  QPushButton* compare_;
  QPushButton* export_;
  RunPlots* plots_;
  QTableWidget* diff_;
  QCheckBox* only_differences_;
  std::vector<std::int64_t> shown_;
  int pending_ = 0;
};

}  // namespace commtune::ui

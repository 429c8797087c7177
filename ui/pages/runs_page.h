// The run browser: every stored run, filtered by text and status, sorted by
// any column. Opening runs shows their plots (the dashboard's, from the
// store) side by side and the parameters in which they differ; Export
// leads to the export dialog; Watch live follows a run that another process
// records (a CLI run, an imported multi-node job) on the dashboard. The list
// follows the store: it is read again when the file changes. Reads happen
// off the UI thread.
#pragma once

#include <QWidget>
#include <cstdint>
#include <string>
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
  // Reads the store again when its files changed since the last read (a timer calls it).
  void refresh_if_changed();
  QPushButton* watch_button() const { return watch_; }

 Q_SIGNALS:
  // The user asked to follow this running run on the dashboard.
  void watch_live(qint64 run_id);
  void loaded(int runs);

 private:
  void show_diff(const std::vector<std::int64_t>& ids);

  // The store's files as last read: (size, modification time) of the database and its WAL.
  QString store_stamp() const;

  QString store_path_;
  QString read_stamp_;
  std::string signature_;  // Store::runs_signature() of the rows shown
  bool checking_ = false;
  QPushButton* watch_ = nullptr;
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

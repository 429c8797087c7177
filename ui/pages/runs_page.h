// The run browser: the runs table (ui/pages/runs/run_table.h: every stored
// run, its metrics and swept parameters as columns, filtered by text, status
// and conditions) over the opened runs: their plots (the dashboard's, from
// the store), the parameters in which they differ and a metrics table like
// `commtune-cli compare` (ui/pages/runs/run_comparison_view.h). Runs take
// tags and notes, runs and sweeps can be renamed and deleted (with their
// metrics), asked first (ui/pages/runs/run_dialogs.h). Export leads to the
// export dialog; Watch live follows a run that another process records on
// the dashboard. The list follows the store: it is read again when the file
// changes. Reads and writes happen off the UI thread; this page wires them.
#pragma once

#include <QWidget>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ui/pages/runs/run_table.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;
class QCheckBox;
class QPoint;

namespace commtune::db {
class Store;
}

namespace commtune::ui {

class RunComparisonView;
class RunPlots;

class RunsPage : public QWidget {
  Q_OBJECT
 public:
  RunsPage(QString store_path, QWidget* parent = nullptr);
  ~RunsPage() override;

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
  QString filter_problem() const;  // why the filter text is refused ("" when it is not)
  // The runs table, with its column chooser (columns by header, remembered; named views).
  RunTable* table() const { return table_; }
  QTableWidget* diff() const { return diff_; }
  QTableWidget* metrics() const { return metrics_; }
  // Edits, done in the store then shown (no confirmation: the menu asks first).
  void annotate(std::int64_t run_id, const QString& name, const QString& tags, const QString& notes);
  void delete_runs(const std::vector<std::int64_t>& run_ids);
  void rename_sweep(std::int64_t sweep_id, const QString& name);
  void delete_sweep(std::int64_t sweep_id);
  // The same, asked first as the context menu does: the question lists the
  // runs; the name box starts from the sweep's name.
  void ask_to_delete_runs(const std::vector<std::int64_t>& run_ids);
  void ask_to_rename_sweep(std::int64_t sweep_id);


 Q_SIGNALS:
  // The user asked to follow this running run on the dashboard.
  void watch_live(qint64 run_id);
  void loaded(int runs);
  void store_changed();  // runs or sweeps were edited or deleted here

 private:
  void show_diff(const std::vector<std::int64_t>& ids);
  void apply_filter();
  void show_menu(const QPoint& at);
  void edit_annotation(std::int64_t run_id);
  // Runs `change` on the store off the UI thread, then reads the list again.
  void change_store(const QString& what, std::function<void(db::Store&)> change);

  // The store's files as last read: (size, modification time) of the database and its WAL.
  QString store_stamp() const;

  QString store_path_;
  QString read_stamp_;
  std::string signature_;  // Store::runs_signature() of the rows shown
  bool checking_ = false;
  QPushButton* watch_ = nullptr;
  RunTable* table_;
  QLineEdit* search_;
  QComboBox* status_;
  QLabel* empty_;
  QPushButton* open_;
  QPushButton* compare_;
  QPushButton* export_;
  RunPlots* plots_;
  QTableWidget* diff_;
  QTableWidget* metrics_;
  std::unique_ptr<RunComparisonView> comparison_;
  QCheckBox* only_differences_;
  QLabel* filter_problem_;
  std::map<std::int64_t, QString> sweep_names_;
  std::vector<std::int64_t> shown_;
  std::vector<std::int64_t> wanted_;  // runs opened before the table had read them: selected once it has
  int pending_ = 0;
};

}  // namespace commtune::ui

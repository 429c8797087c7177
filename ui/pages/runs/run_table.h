// The Runs page's table, a tuner's: every stored run with its tail loss, ms
// and MB per step, compression ratio, tags and every swept parameter as
// columns, sorted by any column (numbers as numbers) and filtered by status
// and by core/tuner/store/run_query.h's conditions (`hook.matrix_approximation_rank
// = 2, tail_loss < 2.1`), the query `commtune-cli list --search` takes. The
// column chooser (right-click a header) hides columns by their header and
// remembers them; a view is a named set of hidden columns.
#pragma once

#include <QString>
#include <QStringList>
#include <QTableView>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tuner/store/run_metrics.h"
#include "core/tuner/store/run_query.h"
#include "db/store.h"

class QPoint;
class QStandardItemModel;

namespace commtune::ui {

class RunFilter;

// A stored run as read off the UI thread for its row.
struct RunRow {
  db::RunRecord run;
  std::string hook;  // describe_hook()
  RunDigest digest;
  QueryRow query;
};

// What a question about a run quotes of its row.
struct RunSummary {
  std::int64_t id = 0;
  QString name;
  QString notes;
  QString tags;
  QString hook;
  QString status;
};

class RunTable final : public QTableView {
  Q_OBJECT
 public:
  explicit RunTable(QWidget* parent = nullptr);

  // Replaces the rows, with a column per parameter in `swept`; the hidden
  // columns are the remembered ones, by name since the columns change.
  void set_runs(const std::vector<RunRow>& rows, const QStringList& swept);
  void clear_runs();
  // `query` in run_query's language (one that does not parse, being typed,
  // hides nothing) and `status` ("" for any); returns why the query is
  // refused, "" when it is not.
  QString set_filter(const QString& query, const QString& status);
  int run_count() const;     // every row, shown or filtered out
  int visible_runs() const;  // rows that pass the filter
  bool holds(std::int64_t run_id) const;  // a row of it, shown or filtered out
  bool lists(std::int64_t run_id) const;  // a row of it that passes the filter
  const QStringList& swept() const { return param_columns_; }

  std::vector<std::int64_t> selected_runs() const;  // sorted
  std::vector<std::int64_t> selected_running_runs() const;
  // Selects these runs where the filter shows them, and no others.
  void select_runs(const std::vector<std::int64_t>& run_ids);
  std::int64_t sweep_at(const QPoint& at) const;  // the sweep of the row under `at` (viewport), 0 for none
  // The rows of these runs, in the table's own order, filtered out or not.
  std::vector<RunSummary> summaries(const std::vector<std::int64_t>& run_ids) const;

  QStringList column_names() const;
  QStringList hidden_columns() const;
  void set_column_visible(const QString& name, bool visible);
  QStringList views() const;
  void save_view(const QString& name);
  void apply_view(const QString& name);

 private:
  void show_column_menu(const QPoint& at);
  void set_hidden_columns(const QStringList& hidden);  // and remembers them
  void show_columns_except(const QStringList& hidden);

  QStandardItemModel* model_;
  RunFilter* filter_;
  QStringList param_columns_;              // the swept parameters shown as columns
  std::vector<QueryRow> query_rows_;       // the model's rows as the filter reads them, in its order
  std::vector<std::string> known_params_;  // every parameter some shown run has
};

}  // namespace commtune::ui

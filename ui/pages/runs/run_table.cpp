#include "ui/pages/runs/run_table.h"

#include <QDateTime>
#include <QHeaderView>
#include <QInputDialog>
#include <QLineEdit>
#include <QMenu>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QStandardItemModel>
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "ui/forms/param_field.h"

namespace commtune::ui {

namespace {

enum Column {
  kId = 0,
  kName,
  kSweep,
  kStatus,
  kHook,
  kTags,
  kRanks,
  kSteps,
  kLoss,
  kLastLoss,
  kMs,
  kMb,
  kRatio,
  kWall,
  kCreated,
  kFirstParam  // then one column per swept parameter
};
// The losses under the names list, show, compare and the Dashboard give them (core/tuner/store/run_metrics.h).
const QStringList kHeaders{"id",      "name",    "sweep",   "status", "hook",   "tags",   "ranks",  "steps",
                           "tail loss", "last loss", "ms/step", "MB/step", "compr.", "wall s", "created"};

// The fixed headers, then each swept parameter by its short name (rank,
// lr); by its whole path where the short one is taken (hook.name: "name"
// and "hook" are columns already).
QStringList column_headers(const QStringList& params) {
  QStringList headers = kHeaders;
  for (const auto& path : params) {
    const auto short_name = short_param_name(path);
    const bool taken = headers.contains(short_name) ||
                       std::count_if(params.begin(), params.end(),
                                     [&](const QString& other) { return short_param_name(other) == short_name; }) > 1;
    headers << (taken ? path : short_name);
  }
  return headers;
}

QStandardItem* number_item(double value, int precision = -1) {
  auto* item = new QStandardItem;
  item->setData(value, Qt::DisplayRole);
  if (precision >= 0) item->setData(QString::number(value, 'f', precision), Qt::DisplayRole);
  item->setData(value, Qt::UserRole + 1);
  return item;
}

QStandardItem* optional_item(const std::optional<double>& value, int precision) {
  if (!value) return new QStandardItem;
  auto* item = number_item(*value, std::isfinite(*value) ? precision : -1);
  if (!std::isfinite(*value)) item->setData(QString::number(*value), Qt::DisplayRole);  // inf, nan: it diverged
  return item;
}

// The name column's item keeps the run's notes apart from its tooltip (name
// and notes together), for the dialog that edits them.
constexpr int kNotesRole = Qt::UserRole + 2;

// Text shown as it is and sorted as text.
QStandardItem* text_item(const std::string& text) {
  auto* item = new QStandardItem(QString::fromStdString(text));
  item->setData(QString::fromStdString(text), Qt::UserRole + 1);
  return item;
}

QList<QStandardItem*> row_items(const RunRow& row, const QStringList& swept) {
  const auto& r = row.run;
  QList<QStandardItem*> items;
  items << number_item(static_cast<double>(r.id));
  auto* name = text_item(r.name);
  name->setToolTip(QString::fromStdString(r.notes.empty() ? r.name : r.name + "\n\n" + r.notes));
  name->setData(QString::fromStdString(r.notes), kNotesRole);
  items << name;
  items << (r.sweep_id ? number_item(static_cast<double>(*r.sweep_id)) : new QStandardItem);
  items << text_item(r.status);
  if (!r.reason.empty()) items.back()->setToolTip(QString::fromStdString(r.reason));
  items << text_item(row.hook);
  items << text_item(r.tags);
  items << number_item(static_cast<double>(r.world_size));
  items << number_item(static_cast<double>(r.steps_completed));
  items << optional_item(row.digest.loss, 5);
  items << optional_item(row.digest.last_loss, 5);
  items << optional_item(row.digest.step_ms, 2);
  items << optional_item(row.digest.wire_mb, 3);
  items << optional_item(row.digest.compression_ratio, 1);
  items << number_item(r.wall_s, 1);
  auto* created = new QStandardItem(
      QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(r.created_at * 1e3)).toString("yyyy-MM-dd hh:mm"));
  created->setData(r.created_at, Qt::UserRole + 1);
  items << created;
  for (const auto& param : swept) {
    const auto it = row.query.params.find(param.toStdString());
    const auto text = it == row.query.params.end() ? QString() : QString::fromStdString(it->second);
    auto* item = new QStandardItem(text);
    item->setData(sort_key(text), Qt::UserRole + 1);
    items << item;
  }
  return items;
}

}  // namespace

// The query language of core/tuner/store/run_query.h over the model's rows: a
// QueryRow per source row, kept beside the model in the same order.
class RunFilter final : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;
  // A query refused (no query: a name it does not know, a condition without its value) shows no run: every
  // run listed under a filter the user typed would read as if it held for all of them.
  void set(std::optional<RunQuery> query, const QString& status, const std::vector<QueryRow>* rows) {
    query_ = std::move(query);
    status_ = status;
    rows_ = rows;
    invalidateFilter();
  }

 protected:
  bool filterAcceptsRow(int row, const QModelIndex& parent) const override {
    const auto* m = sourceModel();
    if (!status_.isEmpty() && m->index(row, kStatus, parent).data().toString() != status_) return false;
    if (!query_) return false;
    if (!rows_ || row >= static_cast<int>(rows_->size())) return true;
    return query_->matches((*rows_)[static_cast<std::size_t>(row)]);
  }

 private:
  std::optional<RunQuery> query_ = RunQuery{};  // none: refused
  QString status_;
  const std::vector<QueryRow>* rows_ = nullptr;
};

RunTable::RunTable(QWidget* parent) : QTableView(parent) {
  model_ = new QStandardItemModel(0, kFirstParam, this);
  model_->setHorizontalHeaderLabels(kHeaders);
  filter_ = new RunFilter(this);
  filter_->setSourceModel(model_);
  filter_->setSortRole(Qt::UserRole + 1);
  setModel(filter_);
  setSortingEnabled(true);
  sortByColumn(kId, Qt::DescendingOrder);
  setSelectionBehavior(QAbstractItemView::SelectRows);
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  verticalHeader()->setVisible(false);
  // The name column fits the names (up to 480 px) and the table scrolls
  // sideways for the rest: a stretched column got what the others left,
  // "matrix_appro…" in a sweep.
  horizontalHeader()->setSectionResizeMode(kName, QHeaderView::Interactive);
  setAlternatingRowColors(true);
  setWordWrap(false);
  setTextElideMode(Qt::ElideRight);  // a trial's name starts with what sets it apart; its tooltip has it all
  setContextMenuPolicy(Qt::CustomContextMenu);
  // The column chooser: right-click a header.
  horizontalHeader()->setContextMenuPolicy(Qt::CustomContextMenu);
  horizontalHeader()->setToolTip("Right-click: choose the columns, save them as a view");
  connect(horizontalHeader(), &QWidget::customContextMenuRequested, this, &RunTable::show_column_menu);
}

void RunTable::clear_runs() {
  model_->removeRows(0, model_->rowCount());
  query_rows_.clear();
}

void RunTable::set_runs(const std::vector<RunRow>& rows, const QStringList& swept) {
  clear_runs();
  param_columns_ = swept;
  model_->setColumnCount(kFirstParam + static_cast<int>(param_columns_.size()));
  model_->setHorizontalHeaderLabels(column_headers(param_columns_));
  model_->horizontalHeaderItem(kLoss)->setToolTip(
      "The mean loss over ranks and the last 10% of steps, 1 to 50 of them "
      "(as compare, show and the Analysis page give it)");
  model_->horizontalHeaderItem(kLastLoss)->setToolTip("The last step's loss (as list and the Dashboard give it)");
  for (int c = kFirstParam; c < model_->columnCount(); ++c) {
    model_->horizontalHeaderItem(c)->setToolTip(param_columns_[c - kFirstParam]);
    horizontalHeader()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
  }
  std::set<std::string> known;
  for (const auto& row : rows) {
    model_->appendRow(row_items(row, param_columns_));
    query_rows_.push_back(row.query);
    for (const auto& [param, value] : row.query.params) known.insert(param);
  }
  known_params_.assign(known.begin(), known.end());
  int widest = fontMetrics().horizontalAdvance(kHeaders[kName]);
  for (int row = 0; row < model_->rowCount(); ++row)
    widest = std::max(widest, fontMetrics().horizontalAdvance(model_->index(row, kName).data().toString()));
  setColumnWidth(kName, std::min(480, widest + 24));
  show_columns_except(QSettings().value("runs/hidden_columns").toStringList());
}

QString RunTable::set_filter(const QString& query, const QString& status) {
  std::optional<RunQuery> parsed;
  QString problem;
  try {
    parsed = RunQuery::parse(query.toStdString(), known_params_);
  } catch (const QueryError& e) {
    problem = QString::fromUtf8(e.what());
  }
  filter_->set(std::move(parsed), status, &query_rows_);
  return problem;
}

int RunTable::run_count() const { return model_->rowCount(); }

int RunTable::visible_runs() const { return filter_->rowCount(); }

bool RunTable::holds(std::int64_t run_id) const {
  for (int row = 0; row < model_->rowCount(); ++row)
    if (model_->index(row, kId).data().toLongLong() == run_id) return true;
  return false;
}

bool RunTable::lists(std::int64_t run_id) const {
  for (int row = 0; row < filter_->rowCount(); ++row)
    if (filter_->index(row, kId).data().toLongLong() == run_id) return true;
  return false;
}

std::vector<std::int64_t> RunTable::selected_runs() const {
  std::vector<std::int64_t> ids;
  for (const auto& index : selectionModel()->selectedRows(kId)) ids.push_back(index.data().toLongLong());
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::int64_t> RunTable::selected_running_runs() const {
  std::vector<std::int64_t> ids;
  for (const auto& index : selectionModel()->selectedRows(kStatus))
    if (index.data().toString() == db::status::kRunning) ids.push_back(index.siblingAtColumn(kId).data().toLongLong());
  return ids;
}

void RunTable::select_runs(const std::vector<std::int64_t>& run_ids) {
  clearSelection();
  for (int row = 0; row < filter_->rowCount(); ++row)
    if (std::count(run_ids.begin(), run_ids.end(), filter_->index(row, kId).data().toLongLong()))
      selectionModel()->select(filter_->index(row, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
}

std::int64_t RunTable::sweep_at(const QPoint& at) const {
  const auto index = indexAt(at);
  return index.isValid() ? index.siblingAtColumn(kSweep).data().toLongLong() : 0;
}

std::vector<RunSummary> RunTable::summaries(const std::vector<std::int64_t>& run_ids) const {
  std::vector<RunSummary> out;
  for (int row = 0; row < model_->rowCount(); ++row) {
    const auto id = model_->index(row, kId).data().toLongLong();
    if (!std::count(run_ids.begin(), run_ids.end(), id)) continue;
    out.push_back({id, model_->index(row, kName).data().toString(),
                   model_->index(row, kName).data(kNotesRole).toString(),
                   model_->index(row, kTags).data().toString(), model_->index(row, kHook).data().toString(),
                   model_->index(row, kStatus).data().toString()});
  }
  return out;
}

QStringList RunTable::column_names() const {
  QStringList out;
  for (int c = 0; c < model_->columnCount(); ++c) out << model_->headerData(c, Qt::Horizontal).toString();
  return out;
}

QStringList RunTable::hidden_columns() const {
  QStringList out;
  for (int c = 0; c < model_->columnCount(); ++c)
    if (isColumnHidden(c)) out << model_->headerData(c, Qt::Horizontal).toString();
  return out;
}

void RunTable::show_columns_except(const QStringList& hidden) {
  for (int c = 0; c < model_->columnCount(); ++c)
    setColumnHidden(c, c != kId && hidden.contains(model_->headerData(c, Qt::Horizontal).toString()));
}

void RunTable::set_hidden_columns(const QStringList& hidden) {
  show_columns_except(hidden);
  QSettings().setValue("runs/hidden_columns", hidden_columns());
}

void RunTable::set_column_visible(const QString& name, bool visible) {
  auto hidden = hidden_columns();
  hidden.removeAll(name);
  if (!visible) hidden << name;
  set_hidden_columns(hidden);
}

QStringList RunTable::views() const {
  QSettings settings;
  settings.beginGroup("runs/views");
  auto names = settings.childKeys();
  names.sort();
  return names;
}

void RunTable::save_view(const QString& name) { QSettings().setValue("runs/views/" + name, hidden_columns()); }

void RunTable::apply_view(const QString& name) {
  set_hidden_columns(QSettings().value("runs/views/" + name).toStringList());
}

void RunTable::show_column_menu(const QPoint& at) {
  QMenu menu(this);
  for (const auto& name : column_names()) {
    if (name == kHeaders[kId]) continue;  // the run's id always shows
    auto* action = menu.addAction(name);
    action->setCheckable(true);
    action->setChecked(!hidden_columns().contains(name));
    connect(action, &QAction::toggled, this, [this, name](bool on) { set_column_visible(name, on); });
  }
  menu.addSeparator();
  menu.addAction("Show every column", this, [this] { set_hidden_columns({}); });
  menu.addAction("Save these columns as a view…", this, [this] {
    bool ok = false;
    const auto name = QInputDialog::getText(this, "Save view", "Name of the view", QLineEdit::Normal, {}, &ok);
    if (ok && !name.trimmed().isEmpty()) save_view(name.trimmed());
  });
  if (const auto saved = views(); !saved.isEmpty()) {
    auto* views_menu = menu.addMenu("Views");
    for (const auto& name : saved) views_menu->addAction(name, this, [this, name] { apply_view(name); });
  }
  menu.exec(horizontalHeader()->mapToGlobal(at));
}

}  // namespace commtune::ui

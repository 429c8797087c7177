#include "ui/pages/runs_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QInputDialog>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <map>
#include <set>

#include "core/store/run_label.h"
#include "core/store/run_metrics.h"
#include "core/store/run_query.h"
#include "core/sweep/sweep_spec.h"
#include "core/verdict/run_comparison.h"
#include "db/store.h"
#include "ui/async.h"
#include "ui/export_dialog.h"
#include "ui/forms/param_field.h"
#include "ui/live/live_feed.h"
#include "ui/plot/run_plots.h"

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
  kMs,
  kMb,
  kRatio,
  kWall,
  kCreated,
  kFirstParam  // then one column per swept parameter
};
const QStringList kHeaders{"id",   "name",    "sweep", "status",  "hook",    "tags",   "ranks",
                           "steps", "tail loss", "ms/step", "MB/step", "compr.", "wall s", "created"};

// The query language of core/store/run_query.h over the model's rows: a
// QueryRow per source row, kept beside the model in the same order.
class RunFilter final : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;
  // A query that does not parse (being typed) hides nothing.
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
    if (!query_ || !rows_ || row >= static_cast<int>(rows_->size())) return true;
    return query_->matches((*rows_)[static_cast<std::size_t>(row)]);
  }

 private:
  std::optional<RunQuery> query_;
  QString status_;
  const std::vector<QueryRow>* rows_ = nullptr;
};

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

}  // namespace

RunsPage::RunsPage(QString store_path, QWidget* parent) : QWidget(parent), store_path_(std::move(store_path)) {
  model_ = new QStandardItemModel(0, kFirstParam, this);
  model_->setHorizontalHeaderLabels(kHeaders);
  proxy_ = new RunFilter(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole + 1);
  table_ = new QTableView(this);
  table_->setObjectName("runs:table");
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(kId, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setVisible(false);
  // The name column fits the names (up to 480 px) and the table scrolls
  // sideways for the rest: a stretched column got what the others left,
  // "matrix_appro…" in a sweep.
  table_->horizontalHeader()->setSectionResizeMode(kName, QHeaderView::Interactive);
  table_->setAlternatingRowColors(true);
  table_->setWordWrap(false);
  table_->setTextElideMode(Qt::ElideRight);  // a trial's name starts with what sets it apart; its tooltip has it all
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(table_, &QWidget::customContextMenuRequested, this, &RunsPage::show_menu);
  // The column chooser: right-click a header.
  table_->horizontalHeader()->setContextMenuPolicy(Qt::CustomContextMenu);
  table_->horizontalHeader()->setToolTip("Right-click: choose the columns, save them as a view");
  connect(table_->horizontalHeader(), &QWidget::customContextMenuRequested, this, &RunsPage::show_column_menu);

  search_ = new QLineEdit(this);
  search_->setObjectName("runs:search");
  search_->setPlaceholderText("Search text, or conditions: hook.matrix_approximation_rank = 2, loss < 2.1, tag = best "
                              "(Ctrl+F)");
  search_->setToolTip(
      "Free text matches any column's or parameter's value. Comma-separated conditions NAME OP VALUE (OP: = != < <= > "
      ">=) test a parameter (hook.matrix_approximation_rank) or a column: id, name, sweep, status, hook, tag, ranks, "
      "steps, loss, ms, mb, ratio, wall. `commtune-cli list --search` takes the same query.");
  search_->setClearButtonEnabled(true);
  status_ = new QComboBox(this);
  status_->setObjectName("runs:status");
  status_->addItem("any status", QString());
  for (const char* s : {db::status::kSucceeded, db::status::kRunning, db::status::kFailed, db::status::kDiverged,
                        db::status::kCancelled, db::status::kInterrupted, db::status::kStopped, db::status::kPaused,
                        db::status::kPending})
    status_->addItem(s, QString(s));
  connect(search_, &QLineEdit::textChanged, this, &RunsPage::apply_filter);
  connect(status_, &QComboBox::currentIndexChanged, this, &RunsPage::apply_filter);
  filter_problem_ = new QLabel(this);
  filter_problem_->setObjectName("runs:filter_problem");
  filter_problem_->setStyleSheet("color: #d9534f;");
  filter_problem_->setVisible(false);

  auto* refresh_button = new QPushButton("Refresh", this);
  refresh_button->setToolTip("Read the store again (F5)");
  open_ = new QPushButton("Open", this);
  open_->setObjectName("runs:open");
  open_->setToolTip("Show the selected runs' curves and parameters (Enter)");
  compare_ = new QPushButton("Compare", this);
  compare_->setToolTip("Overlay the selected runs and list the parameters in which they differ");
  watch_ = new QPushButton("Watch live", this);
  watch_->setObjectName("runs:watch");
  watch_->setToolTip("Follow the selected running run on the dashboard, also when another process records it");
  watch_->setEnabled(false);
  export_ = new QPushButton("Export…", this);
  export_->setObjectName("runs:export");
  export_->setToolTip("Export the selected run for production, its plots or its data (Ctrl+E)");
  auto* annotate = new QPushButton("Tags && notes…", this);
  annotate->setObjectName("runs:annotate");
  annotate->setToolTip("Name the selected run, tag it, write notes on it (also in the right-click menu)");
  connect(annotate, &QPushButton::clicked, this, [this] {
    if (const auto ids = selected_runs(); !ids.empty()) edit_annotation(ids.front());
  });
  connect(refresh_button, &QPushButton::clicked, this, &RunsPage::refresh);
  connect(open_, &QPushButton::clicked, this, [this] { open_runs(selected_runs()); });
  connect(compare_, &QPushButton::clicked, this, [this] { open_runs(selected_runs()); });
  connect(export_, &QPushButton::clicked, this, &RunsPage::export_selected);
  connect(watch_, &QPushButton::clicked, this, [this] {
    for (const auto& index : table_->selectionModel()->selectedRows(kStatus))
      if (index.data().toString() == db::status::kRunning)
        Q_EMIT watch_live(index.siblingAtColumn(kId).data().toLongLong());
  });
  connect(table_, &QTableView::doubleClicked, this, [this] { open_runs(selected_runs()); });
  connect(table_, &QTableView::activated, this, [this] { open_runs(selected_runs()); });

  empty_ = new QLabel("No run matches the filter.", this);
  empty_->setObjectName("runs:empty");
  empty_->setAlignment(Qt::AlignCenter);
  empty_->setVisible(false);

  auto* bar = new QHBoxLayout;
  bar->addWidget(search_, 1);
  bar->addWidget(status_);
  bar->addWidget(refresh_button);
  bar->addWidget(open_);
  bar->addWidget(compare_);
  bar->addWidget(watch_);
  bar->addWidget(annotate);
  bar->addWidget(export_);

  plots_ = new RunPlots(this);
  plots_->set_empty_text("Select runs and press Open (or double-click one) to see their curves here.");
  diff_ = new QTableWidget(this);
  diff_->setObjectName("runs:diff");
  diff_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  only_differences_ = new QCheckBox("only parameters that differ", this);
  only_differences_->setObjectName("runs:only_differences");
  only_differences_->setChecked(true);
  connect(only_differences_, &QCheckBox::toggled, this, [this] { show_diff(shown_); });
  auto* params = new QWidget(this);
  auto* params_layout = new QVBoxLayout(params);
  params_layout->addWidget(only_differences_);
  params_layout->addWidget(diff_, 1);
  metrics_ = new QTableWidget(this);
  metrics_->setObjectName("runs:metrics");
  metrics_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  metrics_->verticalHeader()->setVisible(false);
  metrics_->setToolTip("As commtune-cli compare: tail loss is the mean over ranks and the last 10% of steps, "
                       "ms/step the median over the steady second half, vs base the loss change against allreduce");
  auto* detail = new QTabWidget(this);
  detail->setObjectName("runs:detail");
  detail->addTab(plots_, "Curves");
  detail->addTab(params, "Parameters");
  detail->addTab(metrics_, "Metrics");

  auto* top = new QWidget(this);
  auto* top_layout = new QVBoxLayout(top);
  top_layout->setContentsMargins(0, 0, 0, 0);
  top_layout->addLayout(bar);
  top_layout->addWidget(filter_problem_);
  top_layout->addWidget(table_, 1);
  top_layout->addWidget(empty_);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->setObjectName("runs:splitter");
  splitter->addWidget(top);
  splitter->addWidget(detail);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(splitter);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    bool running = false;
    for (const auto& index : table_->selectionModel()->selectedRows(kStatus))
      running = running || index.data().toString() == db::status::kRunning;
    watch_->setEnabled(running);
  });
  auto* follow_store = new QTimer(this);
  follow_store->setInterval(1000);
  connect(follow_store, &QTimer::timeout, this, &RunsPage::refresh_if_changed);
  follow_store->start();
  refresh();
}

QString RunsPage::store_stamp() const {
  QString stamp;
  for (const auto& path : {store_path_, store_path_ + "-wal"}) {
    const QFileInfo info(path);
    stamp += QString("%1:%2;").arg(info.size()).arg(info.lastModified().toMSecsSinceEpoch());
  }
  return stamp;
}

void RunsPage::refresh_if_changed() {
  if (loading() || checking_ || store_stamp() == read_stamp_) return;
  read_stamp_ = store_stamp();
  // Every committed step touches the files; the list changes only with the runs themselves.
  checking_ = true;
  run_async(
      this, [path = store_path_.toStdString()] { return db::Store(path, db::Store::Access::ReadOnly).runs_signature(); },
      [this](const Outcome<std::string>& out) {
        checking_ = false;
        if (out.value && *out.value != signature_) refresh();
      });
}

int RunsPage::visible_runs() const { return proxy_->rowCount(); }

std::vector<std::int64_t> RunsPage::selected_runs() const {
  std::vector<std::int64_t> ids;
  for (const auto& index : table_->selectionModel()->selectedRows(kId)) ids.push_back(index.data().toLongLong());
  std::sort(ids.begin(), ids.end());
  return ids;
}

void RunsPage::apply_filter() {
  std::optional<RunQuery> query;
  QString problem;
  try {
    query = RunQuery::parse(search_->text().toStdString(), known_params_);
  } catch (const QueryError& e) {
    problem = QString::fromUtf8(e.what());
  }
  filter_problem_->setText(problem);
  filter_problem_->setVisible(!problem.isEmpty());
  static_cast<RunFilter*>(proxy_)->set(std::move(query), status_->currentData().toString(), &query_rows_);
  empty_->setVisible(model_->rowCount() && !proxy_->rowCount());
}

QString RunsPage::filter_problem() const { return filter_problem_->text(); }

void RunsPage::refresh() {
  read_stamp_ = store_stamp();
  struct Row {
    db::RunRecord run;
    std::string hook;
    RunDigest digest;
    QueryRow query;
  };
  struct Loaded {
    std::vector<Row> rows;
    std::string signature;
    QStringList swept;  // every sweep's axes, in the order sweeps name them
    std::map<std::int64_t, QString> sweep_names;
  };
  if (!QFileInfo::exists(store_path_)) {
    model_->removeRows(0, model_->rowCount());
    query_rows_.clear();
    empty_->setText("No runs yet: start one on the Launch page (Ctrl+R).");
    empty_->setVisible(true);
    Q_EMIT loaded(0);
    return;
  }
  ++pending_;
  run_async(
      this,
      [path = store_path_.toStdString()] {
        db::Store store(path, db::Store::Access::ReadOnly);
        Loaded out;
        out.signature = store.runs_signature();
        for (const auto& sweep : store.sweeps()) {
          out.sweep_names[sweep.id] = QString::fromStdString(sweep.name);
          try {
            for (const auto& axis : SweepSpec::parse(sweep.spec).axes)
              if (!out.swept.contains(QString::fromStdString(axis.param)))
                out.swept << QString::fromStdString(axis.param);
          } catch (const std::exception&) {  // a spec this build no longer reads: its runs still show
          }
        }
        for (auto& r : store.runs()) {
          auto hook = describe_hook(r);
          auto digest = digest_run(store, r.id);
          auto query = query_row(r, hook, digest, store.params(r.id));
          out.rows.push_back({std::move(r), std::move(hook), digest, std::move(query)});
        }
        return out;
      },
      [this](const Outcome<Loaded>& out) {
        --pending_;
        const auto keep = selected_runs();
        model_->removeRows(0, model_->rowCount());
    query_rows_.clear();
        if (!out.value) {
          empty_->setText("Cannot read the run store: " + out.error);
          empty_->setVisible(true);
          Q_EMIT loaded(0);
          return;
        }
        signature_ = out.value->signature;
        param_columns_ = out.value->swept;
        sweep_names_ = out.value->sweep_names;
        model_->setColumnCount(kFirstParam + static_cast<int>(param_columns_.size()));
        model_->setHorizontalHeaderLabels(column_headers(param_columns_));
        for (int c = kFirstParam; c < model_->columnCount(); ++c) {
          model_->horizontalHeaderItem(c)->setToolTip(param_columns_[c - kFirstParam]);
          table_->horizontalHeader()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
        }
        std::set<std::string> known;
        for (const auto& [r, hook, digest, query] : out.value->rows) {
          QList<QStandardItem*> items;
          items << number_item(static_cast<double>(r.id));
          auto* name = new QStandardItem(QString::fromStdString(r.name));
          name->setToolTip(QString::fromStdString(r.name));
          name->setData(QString::fromStdString(r.name), Qt::UserRole + 1);
          if (!r.notes.empty()) name->setToolTip(QString::fromStdString(r.name + "\n\n" + r.notes));
          items << name;
          items << (r.sweep_id ? number_item(static_cast<double>(*r.sweep_id)) : new QStandardItem);
          items << new QStandardItem(QString::fromStdString(r.status));
          items.back()->setData(QString::fromStdString(r.status), Qt::UserRole + 1);
          if (!r.reason.empty()) items.back()->setToolTip(QString::fromStdString(r.reason));
          items << new QStandardItem(QString::fromStdString(hook));
          items.back()->setData(QString::fromStdString(hook), Qt::UserRole + 1);
          items << new QStandardItem(QString::fromStdString(r.tags));
          items.back()->setData(QString::fromStdString(r.tags), Qt::UserRole + 1);
          items << number_item(static_cast<double>(r.world_size));
          items << number_item(static_cast<double>(r.steps_completed));
          items << optional_item(digest.loss, 5);
          items << optional_item(digest.step_ms, 2);
          items << optional_item(digest.wire_mb, 3);
          items << optional_item(digest.compression_ratio, 1);
          items << number_item(r.wall_s, 1);
          auto* created = new QStandardItem(
              QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(r.created_at * 1e3)).toString("yyyy-MM-dd hh:mm"));
          created->setData(r.created_at, Qt::UserRole + 1);
          items << created;
          for (const auto& param : param_columns_) {
            const auto it = query.params.find(param.toStdString());
            const auto text = it == query.params.end() ? QString() : QString::fromStdString(it->second);
            auto* item = new QStandardItem(text);
            item->setData(sort_key(text), Qt::UserRole + 1);
            items << item;
          }
          model_->appendRow(items);
          query_rows_.push_back(query);
          for (const auto& [param, value] : query.params) known.insert(param);
        }
        known_params_.assign(known.begin(), known.end());
        int widest = table_->fontMetrics().horizontalAdvance(kHeaders[kName]);
        for (int row = 0; row < model_->rowCount(); ++row)
          widest = std::max(widest, table_->fontMetrics().horizontalAdvance(model_->index(row, kName).data().toString()));
        table_->setColumnWidth(kName, std::min(480, widest + 24));
        show_columns_except(QSettings().value("runs/hidden_columns").toStringList());  // by name: the columns change
        apply_filter();
        empty_->setText(model_->rowCount() ? "No run matches the filter."
                                           : "No runs yet: start one on the Launch page (Ctrl+R).");
        empty_->setVisible(!proxy_->rowCount());
        for (int row = 0; row < proxy_->rowCount(); ++row)
          if (std::count(keep.begin(), keep.end(), proxy_->index(row, kId).data().toLongLong()))
            table_->selectionModel()->select(proxy_->index(row, 0),
                                             QItemSelectionModel::Select | QItemSelectionModel::Rows);
        Q_EMIT loaded(model_->rowCount());
      });
}

void RunsPage::change_store(const QString& what, std::function<void(db::Store&)> change) {
  ++pending_;
  run_async(
      this,
      [path = store_path_.toStdString(), change = std::move(change)] {
        db::Store store(path);
        change(store);
        return true;
      },
      [this, what](const Outcome<bool>& out) {
        --pending_;
        if (!out.value) QMessageBox::warning(this, "commtune", what + ": " + out.error);
        refresh();
        Q_EMIT store_changed();
      });
}

void RunsPage::annotate(std::int64_t run_id, const QString& name, const QString& tags, const QString& notes) {
  change_store(QString("Cannot annotate run %1").arg(run_id),
               [=, name = name.toStdString(), tags = tags.toStdString(), notes = notes.toStdString()](db::Store& s) {
                 s.rename_run(run_id, name);
                 s.annotate_run(run_id, tags, notes);
               });
}

void RunsPage::delete_runs(const std::vector<std::int64_t>& run_ids) {
  if (std::any_of(run_ids.begin(), run_ids.end(),
                  [this](std::int64_t id) { return std::count(shown_.begin(), shown_.end(), id); })) {
    shown_.clear();
    plots_->clear();
    diff_->clear();
    metrics_->clear();
  }
  change_store("Cannot delete", [run_ids](db::Store& s) {
    db::Transaction transaction(s.connection());  // all or none
    for (const auto id : run_ids) s.delete_run(id);
    transaction.commit();
  });
}

void RunsPage::rename_sweep(std::int64_t sweep_id, const QString& name) {
  change_store(QString("Cannot rename sweep %1").arg(sweep_id),
               [sweep_id, name = name.toStdString()](db::Store& s) { s.rename_sweep(sweep_id, name); });
}

void RunsPage::delete_sweep(std::int64_t sweep_id) {
  shown_.clear();
  plots_->clear();
  change_store(QString("Cannot delete sweep %1").arg(sweep_id),
               [sweep_id](db::Store& s) { s.delete_sweep(sweep_id); });
}

void RunsPage::edit_annotation(std::int64_t run_id) {
  QString name, tags, notes;
  for (int row = 0; row < model_->rowCount(); ++row)
    if (model_->index(row, kId).data().toLongLong() == run_id) {
      name = model_->index(row, kName).data().toString();
      tags = model_->index(row, kTags).data().toString();
      notes = model_->index(row, kName).data(Qt::ToolTipRole).toString();
    }
  QDialog dialog(this);
  dialog.setWindowTitle(QString("Run %1").arg(run_id));
  auto* name_edit = new QLineEdit(name, &dialog);
  auto* tags_edit = new QLineEdit(tags, &dialog);
  tags_edit->setPlaceholderText("comma-separated: baseline, best, to-rerun");
  auto* notes_edit = new QPlainTextEdit(notes, &dialog);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, &dialog);
  connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  auto* form = new QFormLayout(&dialog);
  form->addRow("Name", name_edit);
  form->addRow("Tags", tags_edit);
  form->addRow("Notes", notes_edit);
  form->addRow(buttons);
  if (dialog.exec() == QDialog::Accepted)
    annotate(run_id, name_edit->text(), tags_edit->text(), notes_edit->toPlainText());
}

void RunsPage::ask_to_delete_runs(const std::vector<std::int64_t>& run_ids) {
  // Which runs, by id, name and hook, so that a selection gone wrong shows before it is too late.
  QStringList lines;
  for (int row = 0; row < model_->rowCount(); ++row) {
    const auto id = model_->index(row, kId).data().toLongLong();
    if (!std::count(run_ids.begin(), run_ids.end(), id)) continue;
    const auto name = model_->index(row, kName).data().toString();
    lines << QString("run %1%2 (%3, %4)")
                 .arg(id)
                 .arg(name.isEmpty() ? QString() : " '" + name + "'")
                 .arg(model_->index(row, kHook).data().toString(), model_->index(row, kStatus).data().toString());
  }
  constexpr int kListed = 12;
  const auto more = lines.size() > kListed ? QString("\n… and %1 more").arg(lines.size() - kListed) : QString();
  if (lines.size() > kListed) lines = lines.mid(0, kListed);
  QMessageBox question(QMessageBox::Question, "Delete runs",
                       QString("Delete %1 run(s) with all their metrics, statistics and events? This cannot be "
                               "undone.\n\n%2%3")
                           .arg(run_ids.size())
                           .arg(lines.join("\n"), more),
                       QMessageBox::Yes | QMessageBox::No, this);
  question.setTextFormat(Qt::PlainText);  // run names are the user's: never read as HTML
  if (question.exec() == QMessageBox::Yes) delete_runs(run_ids);
}

void RunsPage::ask_to_rename_sweep(std::int64_t sweep_id) {
  bool ok = false;
  const auto it = sweep_names_.find(sweep_id);
  const auto name = QInputDialog::getText(this, "Rename sweep", QString("Name of sweep %1").arg(sweep_id),
                                          QLineEdit::Normal, it == sweep_names_.end() ? QString() : it->second, &ok);
  if (ok) rename_sweep(sweep_id, name);
}

QStringList RunsPage::column_names() const {
  QStringList out;
  for (int c = 0; c < model_->columnCount(); ++c) out << model_->headerData(c, Qt::Horizontal).toString();
  return out;
}

QStringList RunsPage::hidden_columns() const {
  QStringList out;
  for (int c = 0; c < model_->columnCount(); ++c)
    if (table_->isColumnHidden(c)) out << model_->headerData(c, Qt::Horizontal).toString();
  return out;
}

void RunsPage::show_columns_except(const QStringList& hidden) {
  for (int c = 0; c < model_->columnCount(); ++c)
    table_->setColumnHidden(c, c != kId && hidden.contains(model_->headerData(c, Qt::Horizontal).toString()));
}

void RunsPage::set_hidden_columns(const QStringList& hidden) {
  show_columns_except(hidden);
  QSettings().setValue("runs/hidden_columns", hidden_columns());
}

void RunsPage::set_column_visible(const QString& name, bool visible) {
  auto hidden = hidden_columns();
  hidden.removeAll(name);
  if (!visible) hidden << name;
  set_hidden_columns(hidden);
}

QStringList RunsPage::views() const {
  QSettings settings;
  settings.beginGroup("runs/views");
  auto names = settings.childKeys();
  names.sort();
  return names;
}

void RunsPage::save_view(const QString& name) {
  QSettings().setValue("runs/views/" + name, hidden_columns());
}

void RunsPage::apply_view(const QString& name) {
  set_hidden_columns(QSettings().value("runs/views/" + name).toStringList());
}

void RunsPage::show_column_menu(const QPoint& at) {
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
  menu.exec(table_->horizontalHeader()->mapToGlobal(at));
}

void RunsPage::show_menu(const QPoint& at) {
  const auto ids = selected_runs();
  if (ids.empty()) return;
  QMenu menu(this);
  menu.addAction("Open", this, [this, ids] { open_runs(ids); });
  menu.addAction(QString("Tags and notes of run %1…").arg(ids.front()), this,
                 [this, id = ids.front()] { edit_annotation(id); });
  menu.addAction("Export…", this, &RunsPage::export_selected);
  menu.addSeparator();
  menu.addAction(ids.size() == 1 ? QString("Delete run %1…").arg(ids.front())
                                 : QString("Delete %1 runs…").arg(ids.size()),
                 this, [this, ids] { ask_to_delete_runs(ids); });
  const auto index = table_->indexAt(at);
  const auto sweep = index.isValid() ? index.siblingAtColumn(kSweep).data().toLongLong() : 0;
  if (sweep > 0) {
    menu.addSeparator();
    menu.addAction(QString("Rename sweep %1…").arg(sweep), this, [this, sweep] { ask_to_rename_sweep(sweep); });
    menu.addAction(QString("Delete sweep %1 and its runs…").arg(sweep), this, [this, sweep] {
      if (QMessageBox::question(this, "Delete sweep",
                                QString("Delete sweep %1 with every trial and their metrics? This cannot be undone.")
                                    .arg(sweep)) == QMessageBox::Yes)
        delete_sweep(sweep);
    });
  }
  menu.exec(table_->viewport()->mapToGlobal(at));
}

void RunsPage::open_runs(const std::vector<std::int64_t>& run_ids) {
  if (run_ids.empty()) return;
  table_->clearSelection();
  for (int row = 0; row < proxy_->rowCount(); ++row)
    if (std::count(run_ids.begin(), run_ids.end(), proxy_->index(row, kId).data().toLongLong()))
      table_->selectionModel()->select(proxy_->index(row, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
  shown_ = run_ids;
  struct Loaded {
    std::int64_t id;
    QString label;
    std::vector<LivePoint> points;
    BucketStats buckets;
    std::vector<std::pair<QString, QString>> swept;  // its values of the swept parameters: the legend's columns
  };
  std::vector<std::string> swept;
  for (const auto& p : param_columns_) swept.push_back(p.toStdString());
  ++pending_;
  run_async(
      this,
      [path = store_path_.toStdString(), run_ids, swept] {
        db::Store store(path, db::Store::Access::ReadOnly);
        std::vector<Loaded> out;
        for (const auto id : run_ids) {
          const auto run = store.run(id);
          if (!run) continue;
          BucketStats buckets{id, 0, {}};
          for (const auto& [name, point] : store.latest_bucket_stats(id)) {
            buckets.step = std::max(buckets.step, point.step);
            buckets.values[static_cast<std::uint32_t>(point.bucket)][name] = point.value;
          }
          const auto params = query_row(*run, {}, {}, store.params(id)).params;
          std::vector<std::pair<QString, QString>> values;
          for (const auto& p : swept)
            if (const auto it = params.find(p); it != params.end())
              values.emplace_back(QString::fromStdString(p), QString::fromStdString(it->second));
          out.push_back({id,
                         QString("%1 %2").arg(id).arg(
                             QString::fromStdString(run_label(*run))),
                         stored_points(id, store.steps(id)), std::move(buckets), std::move(values)});
        }
        return out;
      },
      [this](const Outcome<std::vector<Loaded>>& out) {
        --pending_;
        plots_->clear();
        if (!out.value) {
          plots_->set_empty_text("Cannot read the runs: " + out.error);
          return;
        }
        for (const auto& run : *out.value) {
          plots_->add_run(run.id, run.label, run.swept);
          for (const auto& p : run.points) plots_->append(p);
          plots_->set_bucket_stats(run.buckets);
        }
        plots_->refresh();
      });
  show_diff(run_ids);
}

void RunsPage::show_diff(const std::vector<std::int64_t>& ids) {
  ++pending_;
  run_async(
      this,
      [path = store_path_.toStdString(), ids] {
        const db::Store store(path, db::Store::Access::ReadOnly);
        return compare_runs(store, ids);  // as `commtune-cli compare`: each run against its own baseline
      },
      [this](const Outcome<RunComparison>& out) {
        --pending_;
        diff_->clear();
        metrics_->clear();
        if (!out.value) return;
        const auto& runs = out.value->runs;
        const std::set<std::string> differing(out.value->differing.begin(), out.value->differing.end());
        std::set<std::string> names;
        for (const auto& r : runs)
          for (const auto& [name, value] : r.params) names.insert(name);
        std::vector<std::pair<std::string, bool>> rows;  // name, differs
        for (const auto& name : names) {
          const bool differs = differing.count(name) > 0;
          if (only_differences_->isChecked() && runs.size() > 1 && !differs) continue;
          rows.emplace_back(name, differs);
        }
        // Swept differences first, then the rest.
        std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        QStringList headers{"parameter"};
        for (const auto& r : runs) headers << QString("run %1").arg(r.run.id);
        diff_->setColumnCount(static_cast<int>(headers.size()));
        diff_->setHorizontalHeaderLabels(headers);
        diff_->setRowCount(static_cast<int>(rows.size()));
        for (int row = 0; row < static_cast<int>(rows.size()); ++row) {
          const auto& [name, differs] = rows[static_cast<std::size_t>(row)];
          diff_->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(name)));
          for (std::size_t c = 0; c < runs.size(); ++c) {
            const auto it = runs[c].params.find(name);
            auto* item = new QTableWidgetItem(it == runs[c].params.end() ? QString("–")
                                                                         : QString::fromStdString(param_text(it->second)));
            QFont font = item->font();
            font.setBold(differs);
            item->setFont(font);
            diff_->setItem(row, static_cast<int>(c) + 1, item);
          }
        }
        diff_->resizeColumnsToContents();

        metrics_->setColumnCount(8);
        metrics_->setHorizontalHeaderLabels(
            {"run", "label", "steps", "tail loss", "vs base", "ms/step", "MB/step", "compr."});
        metrics_->setRowCount(static_cast<int>(runs.size()));
        auto text = [](const std::optional<double>& v, int precision, const QString& suffix = {}) {
          return v ? QString::number(*v, 'f', precision) + suffix : QString("–");
        };
        for (int row = 0; row < static_cast<int>(runs.size()); ++row) {
          const auto& r = runs[static_cast<std::size_t>(row)];
          const auto& change = r.loss_change;
          const QStringList cells{
              QString::number(r.run.id) + (r.is_baseline ? "*" : ""),
              QString::fromStdString(r.label),
              QString::number(r.digest.steps),
              r.digest.loss && !std::isfinite(*r.digest.loss) ? QString::number(*r.digest.loss)
                                                              : text(r.digest.loss, 5),
              change ? QString("%1%2%").arg(*change >= 0 ? "+" : "").arg(100 * *change, 0, 'f', 2) : QString("–"),
              text(r.digest.step_ms, 2),
              text(r.digest.wire_mb, 3),
              text(r.digest.compression_ratio, 1, "x")};
          for (int c = 0; c < cells.size(); ++c) metrics_->setItem(row, c, new QTableWidgetItem(cells[c]));
        }
        metrics_->resizeColumnsToContents();
      });
}

void RunsPage::export_selected() {
  const auto ids = selected_runs();
  if (ids.empty()) return;
  if (shown_ != ids) open_runs(ids);
  auto* dialog = new ExportDialog(store_path_, ids.front(), plots_, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->show();
}

}  // namespace commtune::ui

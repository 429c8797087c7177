#include "ui/pages/runs_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
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

#include "core/netmodel/recommend.h"
#include "db/store.h"
#include "ui/async.h"
#include "ui/export_dialog.h"
#include "ui/forms/param_field.h"
#include "ui/live/live_feed.h"
#include "ui/plot/run_plots.h"

namespace commtune::ui {

namespace {

enum Column { kId = 0, kName, kSweep, kStatus, kHook, kRanks, kSteps, kLoss, kWall, kCreated, kColumns };

// Text search over every column, and a status to match exactly.
class RunFilter final : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;
  void set(const QString& text, const QString& status) {
    text_ = text;
    status_ = status;
    invalidateFilter();
  }

 protected:
  bool filterAcceptsRow(int row, const QModelIndex& parent) const override {
    const auto* m = sourceModel();
    if (!status_.isEmpty() && m->index(row, kStatus, parent).data().toString() != status_) return false;
    if (text_.isEmpty()) return true;
    for (int c = 0; c < m->columnCount(); ++c)
      if (m->index(row, c, parent).data().toString().contains(text_, Qt::CaseInsensitive)) return true;
    return m->index(row, kName, parent).data(Qt::UserRole).toString().contains(text_, Qt::CaseInsensitive);
  }

 private:
  QString text_, status_;
};

QStandardItem* number_item(double value, int precision = -1) {
  auto* item = new QStandardItem;
  item->setData(value, Qt::DisplayRole);
  if (precision >= 0) item->setData(QString::number(value, 'f', precision), Qt::DisplayRole);
  item->setData(value, Qt::UserRole + 1);
  return item;
}

}  // namespace

RunsPage::RunsPage(QString store_path, QWidget* parent) : QWidget(parent), store_path_(std::move(store_path)) {
  model_ = new QStandardItemModel(0, kColumns, this);
  model_->setHorizontalHeaderLabels(
      {"id", "name", "sweep", "status", "hook", "ranks", "steps", "last loss", "wall s", "created"});
  auto* filter = new RunFilter(this);
  proxy_ = filter;
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
  table_->horizontalHeader()->setSectionResizeMode(kName, QHeaderView::Stretch);
  table_->setAlternatingRowColors(true);

  search_ = new QLineEdit(this);
  search_->setObjectName("runs:search");
  search_->setPlaceholderText("Search name, hook, status, configuration… (Ctrl+F)");
  search_->setClearButtonEnabled(true);
  status_ = new QComboBox(this);
  status_->setObjectName("runs:status");
  status_->addItem("any status", QString());
  for (const char* s : {db::status::kSucceeded, db::status::kRunning, db::status::kFailed, db::status::kDiverged,
                        db::status::kCancelled, db::status::kInterrupted, db::status::kStopped, db::status::kPaused,
                        db::status::kPending})
    status_->addItem(s, QString(s));
  auto apply_filter = [this, filter] {
    filter->set(search_->text(), status_->currentData().toString());
    empty_->setVisible(model_->rowCount() && !proxy_->rowCount());
  };
  connect(search_, &QLineEdit::textChanged, this, apply_filter);
  connect(status_, &QComboBox::currentIndexChanged, this, apply_filter);

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
  bar->addWidget(export_);

  plots_ = new RunPlots(this);
  plots_->set_empty_text("Select runs and press Open (or double-click one) to see their curves here.");
  diff_ = new QTableWidget(this);
  diff_->setObjectName("runs:diff");
  diff_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  only_differences_ = new QCheckBox("only parameters that differ", this);
  only_differences_->setChecked(true);
  connect(only_differences_, &QCheckBox::toggled, this, [this] { show_diff(shown_); });
  auto* params = new QWidget(this);
  auto* params_layout = new QVBoxLayout(params);
  params_layout->addWidget(only_differences_);
  params_layout->addWidget(diff_, 1);
  auto* detail = new QTabWidget(this);
  detail->addTab(plots_, "Curves");
  detail->addTab(params, "Parameters");

  auto* top = new QWidget(this);
  auto* top_layout = new QVBoxLayout(top);
  top_layout->setContentsMargins(0, 0, 0, 0);
  top_layout->addLayout(bar);
  top_layout->addWidget(table_, 1);
  top_layout->addWidget(empty_);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->setObjectName("runs:splitter");
  splitter->addWidget(top);
  splitter->addWidget(detail);
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 3);
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

void RunsPage::refresh() {
  read_stamp_ = store_stamp();
  struct Row {
    db::RunRecord run;
    std::string hook;
  };
  if (!QFileInfo::exists(store_path_)) {
    model_->removeRows(0, model_->rowCount());
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
        std::pair<std::vector<Row>, std::string> out;
        out.second = store.runs_signature();
        for (auto& r : store.runs()) out.first.push_back({r, describe_hook(r.config)});
        return out;
      },
      [this](const Outcome<std::pair<std::vector<Row>, std::string>>& loaded_rows) {
        --pending_;
        Outcome<std::vector<Row>> out;
        out.error = loaded_rows.error;
        if (loaded_rows.value) {
          out.value = loaded_rows.value->first;
          signature_ = loaded_rows.value->second;
        }
        const auto keep = selected_runs();
        model_->removeRows(0, model_->rowCount());
        if (!out.value) {
          empty_->setText("Cannot read the run store: " + out.error);
          empty_->setVisible(true);
          Q_EMIT loaded(0);
          return;
        }
        for (const auto& [r, hook] : *out.value) {
          QList<QStandardItem*> items;
          items << number_item(static_cast<double>(r.id));
          auto* name = new QStandardItem(QString::fromStdString(r.name));
          name->setData(QString::fromStdString(r.config.dump()), Qt::UserRole);
          name->setData(QString::fromStdString(r.name), Qt::UserRole + 1);
          items << name;
          items << (r.sweep_id ? number_item(static_cast<double>(*r.sweep_id)) : new QStandardItem);
          items << new QStandardItem(QString::fromStdString(r.status));
          items.back()->setData(QString::fromStdString(r.status), Qt::UserRole + 1);
          if (!r.reason.empty()) items.back()->setToolTip(QString::fromStdString(r.reason));
          items << new QStandardItem(QString::fromStdString(hook));
          items.back()->setData(QString::fromStdString(hook), Qt::UserRole + 1);
          items << number_item(static_cast<double>(r.world_size));
          items << number_item(static_cast<double>(r.steps_completed));
          items << (r.final_loss ? number_item(*r.final_loss) : new QStandardItem);
          items << number_item(r.wall_s, 1);
          auto* created = new QStandardItem(
              QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(r.created_at * 1e3)).toString("yyyy-MM-dd hh:mm"));
          created->setData(r.created_at, Qt::UserRole + 1);
          items << created;
          model_->appendRow(items);
        }
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
  };
  ++pending_;
  run_async(
      this,
      [path = store_path_.toStdString(), run_ids] {
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
          out.push_back({id,
                         QString("%1 %2").arg(id).arg(
                             QString::fromStdString(run->name.empty() ? describe_hook(run->config) : run->name)),
                         stored_points(id, store.steps(id)), std::move(buckets)});
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
          plots_->add_run(run.id, run.label);
          for (const auto& p : run.points) plots_->append(p);
          plots_->set_bucket_stats(run.buckets);
        }
        plots_->refresh();
      });
  show_diff(run_ids);
}

void RunsPage::show_diff(const std::vector<std::int64_t>& ids) {
  using Params = std::vector<std::pair<std::int64_t, std::vector<std::pair<std::string, nlohmann::json>>>>;
  ++pending_;
  run_async(
      this,
      [path = store_path_.toStdString(), ids] {
        db::Store store(path, db::Store::Access::ReadOnly);
        Params out;
        for (const auto id : ids) out.emplace_back(id, store.params(id));
        return out;
      },
      [this](const Outcome<Params>& out) {
        --pending_;
        diff_->clear();
        if (!out.value) return;
        std::map<std::string, std::vector<QString>> table;
        const auto& runs = *out.value;
        for (std::size_t c = 0; c < runs.size(); ++c)
          for (const auto& [name, value] : runs[c].second) {
            auto& row = table[name];
            row.resize(runs.size());
            row[c] = value_text(value);
          }
        QStringList headers{"parameter"};
        for (const auto& [id, p] : runs) headers << QString("run %1").arg(id);
        diff_->setColumnCount(static_cast<int>(headers.size()));
        diff_->setHorizontalHeaderLabels(headers);
        diff_->setRowCount(0);
        for (auto& [name, values] : table) {
          values.resize(runs.size());
          const bool differs = std::set<QString>(values.begin(), values.end()).size() > 1;
          if (only_differences_->isChecked() && runs.size() > 1 && !differs) continue;
          const int row = diff_->rowCount();
          diff_->insertRow(row);
          diff_->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(name)));
          for (std::size_t c = 0; c < values.size(); ++c) {
            auto* item = new QTableWidgetItem(values[c]);
            if (differs)
              item->setFont([f = item->font()]() mutable {
                f.setBold(true);
                return f;
              }());
            diff_->setItem(row, static_cast<int>(c) + 1, item);
          }
        }
        diff_->resizeColumnsToContents();
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

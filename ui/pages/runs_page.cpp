#include "ui/pages/runs_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <map>
#include <set>

#include "core/tuner/store/run_label.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/store/run_query.h"
#include "core/tuner/sweep/sweep_spec.h"
#include "core/tuner/verdict/run_comparison.h"
#include "db/store.h"
#include "ui/async.h"
#include "ui/export_dialog.h"
#include "ui/live/live_feed.h"
#include "ui/pages/runs/run_comparison_view.h"
#include "ui/pages/runs/run_dialogs.h"
#include "ui/plot/run_plots.h"

namespace commtune::ui {

RunsPage::RunsPage(QString store_path, QWidget* parent) : QWidget(parent), store_path_(std::move(store_path)) {
  table_ = new RunTable(this);
  table_->setObjectName("runs:table");
  connect(table_, &QWidget::customContextMenuRequested, this, &RunsPage::show_menu);

  search_ = new QLineEdit(this);
  search_->setObjectName("runs:search");
  search_->setPlaceholderText(
      "Search text, or conditions: hook.matrix_approximation_rank = 2, tail_loss < 2.1, tag = best "
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
    for (const auto id : table_->selected_running_runs()) Q_EMIT watch_live(id);
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
  comparison_ = std::make_unique<RunComparisonView>(diff_, metrics_);
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
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          [this] { watch_->setEnabled(!table_->selected_running_runs().empty()); });
  auto* follow_store = new QTimer(this);
  follow_store->setInterval(1000);
  connect(follow_store, &QTimer::timeout, this, &RunsPage::refresh_if_changed);
  follow_store->start();
  refresh();
}

RunsPage::~RunsPage() = default;

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
      this,
      [path = store_path_.toStdString()] { return db::Store(path, db::Store::Access::ReadOnly).runs_signature(); },
      [this](const Outcome<std::string>& out) {
        checking_ = false;
        if (out.value && *out.value != signature_) refresh();
      });
}

int RunsPage::visible_runs() const { return table_->visible_runs(); }

std::vector<std::int64_t> RunsPage::selected_runs() const { return table_->selected_runs(); }

void RunsPage::apply_filter() {
  const auto problem = table_->set_filter(search_->text(), status_->currentData().toString());
  filter_problem_->setText(problem);
  filter_problem_->setVisible(!problem.isEmpty());
  empty_->setVisible(table_->run_count() && !table_->visible_runs());
}

QString RunsPage::filter_problem() const { return filter_problem_->text(); }

void RunsPage::refresh() {
  read_stamp_ = store_stamp();
  struct Loaded {
    std::vector<RunRow> rows;
    std::string signature;
    QStringList swept;  // every sweep's axes, in the order sweeps name them
    std::map<std::int64_t, QString> sweep_names;
  };
  if (!QFileInfo::exists(store_path_)) {
    table_->clear_runs();
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
          auto digest = digest_run(store, r);
          auto query = query_row(r, hook, digest);
          out.rows.push_back({std::move(r), std::move(hook), digest, std::move(query)});
        }
        return out;
      },
      [this](const Outcome<Loaded>& out) {
        --pending_;
        const auto keep = selected_runs();
        if (!out.value) {
          table_->clear_runs();
          empty_->setText("Cannot read the run store: " + out.error);
          empty_->setVisible(true);
          Q_EMIT loaded(0);
          return;
        }
        signature_ = out.value->signature;
        sweep_names_ = out.value->sweep_names;
        table_->set_runs(out.value->rows, out.value->swept);
        apply_filter();
        empty_->setText(table_->run_count() ? "No run matches the filter."
                                            : "No runs yet: start one on the Launch page (Ctrl+R).");
        empty_->setVisible(!table_->visible_runs());
        table_->select_runs(wanted_.empty() ? keep : wanted_);
        wanted_.clear();
        Q_EMIT loaded(table_->run_count());
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
    comparison_->clear();
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
  change_store(QString("Cannot delete sweep %1").arg(sweep_id), [sweep_id](db::Store& s) { s.delete_sweep(sweep_id); });
}

void RunsPage::edit_annotation(std::int64_t run_id) {
  Annotation now;
  if (const auto rows = table_->summaries({run_id}); !rows.empty())
    now = {rows.front().name, rows.front().tags, rows.front().notes};
  if (const auto answer = ask_annotation(this, run_id, now))
    annotate(run_id, answer->name, answer->tags, answer->notes);
}

void RunsPage::ask_to_delete_runs(const std::vector<std::int64_t>& run_ids) {
  if (confirm_delete_runs(this, run_ids.size(), table_->summaries(run_ids))) delete_runs(run_ids);
}

void RunsPage::ask_to_rename_sweep(std::int64_t sweep_id) {
  const auto it = sweep_names_.find(sweep_id);
  if (const auto name = ask_sweep_name(this, sweep_id, it == sweep_names_.end() ? QString() : it->second))
    rename_sweep(sweep_id, *name);
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
  menu.addAction(
      ids.size() == 1 ? QString("Delete run %1…").arg(ids.front()) : QString("Delete %1 runs…").arg(ids.size()), this,
      [this, ids] { ask_to_delete_runs(ids); });
  if (const auto sweep = table_->sweep_at(at); sweep > 0) {
    menu.addSeparator();
    menu.addAction(QString("Rename sweep %1…").arg(sweep), this, [this, sweep] { ask_to_rename_sweep(sweep); });
    menu.addAction(QString("Delete sweep %1 and its runs…").arg(sweep), this, [this, sweep] {
      if (confirm_delete_sweep(this, sweep)) delete_sweep(sweep);
    });
  }
  menu.exec(table_->viewport()->mapToGlobal(at));
}

void RunsPage::open_runs(const std::vector<std::int64_t>& run_ids) {
  if (run_ids.empty()) return;
  // A run opened from a curve or a point is listed and selected: a filter that
  // hides it goes, and a run the table has not read yet is selected once it has.
  const auto hidden = [&](auto test) { return std::any_of(run_ids.begin(), run_ids.end(), test); };
  if (hidden([&](std::int64_t id) { return table_->holds(id) && !table_->lists(id); })) {
    search_->clear();
    status_->setCurrentIndex(0);
  }
  table_->select_runs(run_ids);
  if (hidden([&](std::int64_t id) { return !table_->holds(id); })) {
    wanted_ = run_ids;
    refresh();
  }
  shown_ = run_ids;
  struct Loaded {
    std::int64_t id;
    QString label;
    std::vector<LivePoint> points;
    BucketStats buckets;
    std::vector<std::pair<QString, QString>> swept;  // its values of the swept parameters: the legend's columns
    QString seed;
  };
  std::vector<std::string> swept;
  for (const auto& p : table_->swept()) swept.push_back(p.toStdString());
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
          const auto params = query_row(*run, {}, {}).params;
          std::vector<std::pair<QString, QString>> values;
          for (const auto& p : swept)
            if (const auto it = params.find(p); it != params.end())
              values.emplace_back(QString::fromStdString(p), QString::fromStdString(it->second));
          const auto seed = params.find("seed");
          out.push_back({id, QString("%1 %2").arg(id).arg(QString::fromStdString(run_label(*run))),
                         stored_points(id, store.steps(id)), std::move(buckets), std::move(values),
                         seed == params.end() ? QString() : QString::fromStdString(seed->second)});
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
        // The seed is a column and a grouping too when the runs differ in it (--seeds is no sweep axis).
        std::set<QString> seeds;
        for (const auto& run : *out.value) seeds.insert(run.seed);
        for (const auto& run : *out.value) {
          auto values = run.swept;
          const bool swept_seed =  // a sweep axis of its own: a column already
              std::any_of(values.begin(), values.end(), [](const auto& v) { return v.first == "seed"; });
          if (seeds.size() > 1 && !swept_seed) values.emplace_back("seed", run.seed);
          plots_->add_run(run.id, run.label, values);
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
        comparison_->clear();
        if (out.value) comparison_->draw(*out.value, only_differences_->isChecked());
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

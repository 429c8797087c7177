#include "ui/pages/analysis_page.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QScrollBar>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include "ui/plot/qcustomplot.h"

#include "core/tuner/verdict/recommend.h"
#include "db/store.h"
#include "ui/async.h"
#include "ui/forms/param_field.h"
#include "ui/pages/analysis/heatmap_view.h"
#include "ui/pages/analysis/history_view.h"
#include "ui/pages/analysis/scatter_matrix_view.h"
#include "ui/pages/analysis/importance_view.h"
#include "ui/pages/analysis/pareto_view.h"
#include "ui/pages/analysis/slice_view.h"
#include "ui/plot/parallel_coordinates.h"
#include "ui/plot/plot_readout.h"
#include "ui/plot/plot_style.h"
#include "ui/theme.h"

namespace commtune::ui {

namespace {

// The loss tolerance the verdicts use, in percent, kept across restarts.
constexpr const char* kToleranceKey = "analysis/tolerance_percent";

// The tolerance the user left; recommend's 1% when none was saved or the settings file holds no
// number in the box's range (edited by hand: "abc", nan, 1e9 would not be clamped into a verdict).
double saved_tolerance(double lowest, double highest) {
  bool ok = false;
  const double percent = QSettings().value(kToleranceKey, 1.0).toDouble(&ok);
  return ok && std::isfinite(percent) && percent >= lowest && percent <= highest ? percent : 1.0;
}

QTableWidgetItem* cell(const std::optional<double>& v, int precision) {
  return new QTableWidgetItem(v ? QString::number(*v, 'f', precision) : QString("–"));
}

}  // namespace

AnalysisPage::AnalysisPage(QString store_path, QWidget* parent) : QWidget(parent), store_path_(std::move(store_path)) {
  scope_ = new QComboBox(this);
  scope_->setObjectName("analysis:scope");
  x_metric_ = new QComboBox(this);
  x_metric_->addItems({"bytes on the wire (MB per step)", "predicted step time (ms)"});
  link_ = new QComboBox(this);
  link_->setObjectName("analysis:link");
  for (const auto& l : net::link_presets()) link_->addItem(QString::fromStdString(l.name));
  link_->setCurrentText("10gbit");
  nodes_ = new QSpinBox(this);
  nodes_->setRange(0, 4096);
  nodes_->setSpecialValueText("as many as ranks");
  ranks_per_node_ = new QSpinBox(this);
  ranks_per_node_->setRange(1, 64);
  compute_scale_ = new QDoubleSpinBox(this);
  compute_scale_->setObjectName("analysis:compute_scale");
  compute_scale_->setDecimals(3);
  compute_scale_->setRange(0.001, 100);
  compute_scale_->setValue(1);
  compute_scale_->setPrefix("x ");
  compute_scale_->setToolTip(
      "The target's compute time as a multiple of this machine's (0.02: a device 50x faster); communication stays "
      "the runs' bytes. For a measured target, use commtune-cli predict --compute-from RUN");
  tolerance_ = new QDoubleSpinBox(this);
  tolerance_->setObjectName("analysis:tolerance");
  tolerance_->setDecimals(1);
  tolerance_->setRange(0, 100);
  tolerance_->setSingleStep(0.5);
  tolerance_->setValue(saved_tolerance(tolerance_->minimum(), tolerance_->maximum()));
  tolerance_->setSuffix(" %");
  tolerance_->setToolTip("How much higher than allreduce's a recommended configuration's tail loss may be "
                         "(commtune-cli recommend --tolerance, as a percentage)");
  heat_x_ = new QComboBox(this);
  heat_x_->setObjectName("analysis:heat_x");
  heat_y_ = new QComboBox(this);
  heat_y_->setObjectName("analysis:heat_y");
  auto* refresh_button = new QPushButton("Refresh", this);
  resume_ = new QPushButton("Resume sweep", this);
  resume_->setObjectName("analysis:resume");
  resume_->setToolTip("Go on with this sweep: finished trials stay, an interrupted one continues from its checkpoint");
  resume_->setEnabled(false);
  auto* to_dashboard = to_dashboard_ = new QPushButton("Show on Dashboard", this);
  to_dashboard->setObjectName("analysis:to_dashboard");
  to_dashboard->setToolTip("Put this sweep's trials back on the Dashboard, their curves as the store holds them");
  connect(to_dashboard, &QPushButton::clicked, this, [this] {
    if (const auto sweep = scope_->currentData().toLongLong(); sweep > 0) Q_EMIT dashboard_requested(sweep);
  });
  connect(resume_, &QPushButton::clicked, this,
          [this] { Q_EMIT resume_requested(scope_->currentData().toLongLong()); });

  newer_sweep_ = new QPushButton(this);
  newer_sweep_->setObjectName("analysis:newer_sweep");
  newer_sweep_->setToolTip("A sweep recorded since you chose the one shown (here, by commtune-cli or another "
                           "window): show it");
  newer_sweep_->hide();
  connect(newer_sweep_, &QPushButton::clicked, this, [this] { select_sweep(offered_sweep_); });

  auto* controls = new QFormLayout;
  auto* runs_row = new QHBoxLayout;
  runs_row->addWidget(scope_, 1);
  runs_row->addWidget(newer_sweep_);
  controls->addRow("Runs", runs_row);
  auto* cluster = new QHBoxLayout;
  cluster->addWidget(link_);
  cluster->addWidget(new QLabel("nodes", this));
  cluster->addWidget(nodes_);
  cluster->addWidget(new QLabel("ranks per node", this));
  cluster->addWidget(ranks_per_node_);
  cluster->addWidget(new QLabel("compute", this));
  cluster->addWidget(compute_scale_);
  cluster->addWidget(new QLabel("loss tolerance", this));
  cluster->addWidget(tolerance_);
  cluster->addStretch();
  cluster->addWidget(refresh_button);
  cluster->addWidget(resume_);
  cluster->addWidget(to_dashboard);
  controls->addRow("Target cluster", cluster);
  controls->addRow("Pareto x axis", x_metric_);

  pareto_ = new QCustomPlot(this);
  pareto_->setObjectName("plot:pareto");
  pareto_->setMinimumSize(320, 240);
  pareto_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  pareto_->yAxis->setLabel("tail loss (mean of the last 10% of steps)");
  heatmap_ = new QCustomPlot(this);
  heatmap_->setObjectName("plot:heatmap");
  heatmap_->setMinimumSize(320, 240);
  auto* heat_controls = new QHBoxLayout;
  heat_controls->addWidget(new QLabel("Loss over", this));
  heat_controls->addWidget(heat_x_, 1);
  heat_controls->addWidget(new QLabel("×", this));
  heat_controls->addWidget(heat_y_, 1);
  auto* heat_box = new QWidget(this);
  auto* heat_layout = new QVBoxLayout(heat_box);
  heat_layout->setContentsMargins(0, 0, 0, 0);
  heat_layout->addLayout(heat_controls);
  heat_layout->addWidget(heatmap_, 1);

  what_if_ = new QTableWidget(0, 6, this);
  what_if_->setObjectName("analysis:what_if");
  what_if_->setHorizontalHeaderLabels({"network", "allreduce ms", "recommended", "its ms", "speedup", "verdict"});
  // The verdict takes the width left and wraps, so every word of it is in view.
  what_if_->horizontalHeader()->setSectionResizeMode(5, QHeaderView::Stretch);
  what_if_->setWordWrap(true);
  what_if_->setTextElideMode(Qt::ElideNone);
  connect(what_if_->horizontalHeader(), &QHeaderView::sectionResized, this, [this](int section) {
    if (section == 5) fit_what_if();
  });
  what_if_->verticalHeader()->setVisible(false);
  what_if_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  note_ = new QLabel(this);
  note_->setObjectName("analysis:note");
  note_->setWordWrap(true);

  auto* plots = new QSplitter(this);
  plots->setObjectName("analysis:plots");
  plots->addWidget(pareto_);
  plots->addWidget(heat_box);
  plots->setStretchFactor(0, 1);
  plots->setStretchFactor(1, 1);
  plots->setSizes({1000, 1000});

  parallel_ = new ParallelCoordinates(this);
  parallel_->setToolTip("Drag along an axis to keep a range of it; click an axis to let it take every value again");
  parallel_table_ = new QTableWidget(this);
  parallel_table_->setObjectName("analysis:parallel_table");
  parallel_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  parallel_table_->verticalHeader()->setVisible(false);
  parallel_table_->setSortingEnabled(true);
  auto* open_brushed = new QPushButton("Open these runs", this);
  open_brushed->setObjectName("analysis:open_brushed");
  open_brushed->setToolTip("Show the trials the brushes keep on the Runs page: curves, parameters, metrics");
  auto* clear_brushes = new QPushButton("Clear brushes", this);
  connect(open_brushed, &QPushButton::clicked, this, [this] { Q_EMIT open_runs_requested(parallel_->matching_runs()); });
  connect(clear_brushes, &QPushButton::clicked, parallel_, &ParallelCoordinates::clear_brushes);
  connect(parallel_, &ParallelCoordinates::selection_changed, this, &AnalysisPage::fill_parallel_table);
  auto* parallel_buttons = new QHBoxLayout;
  parallel_buttons->addStretch();
  parallel_buttons->addWidget(clear_brushes);
  parallel_buttons->addWidget(open_brushed);
  auto* parallel_side = new QWidget(this);
  auto* parallel_side_layout = new QVBoxLayout(parallel_side);
  parallel_side_layout->setContentsMargins(0, 0, 0, 0);
  parallel_side_layout->addWidget(parallel_table_, 1);
  parallel_side_layout->addLayout(parallel_buttons);
  auto* parallel_box = new QSplitter(Qt::Vertical, this);
  parallel_box->addWidget(parallel_);
  parallel_box->addWidget(parallel_side);
  parallel_box->setStretchFactor(0, 3);
  parallel_box->setStretchFactor(1, 2);

  importance_ = new QCustomPlot(this);
  importance_->setObjectName("plot:importance");
  importance_->setMinimumSize(320, 200);
  importance_->yAxis->setLabel("share of the tail loss's variance");
  importance_->yAxis->setRange(0, 1);
  importance_note_ = new QLabel(this);
  importance_note_->setObjectName("analysis:importance_method");
  auto* importance_note = importance_note_;
  importance_note->setWordWrap(true);
  importance_note->setEnabled(false);
  auto* importance_box = new QWidget(this);
  auto* importance_layout = new QVBoxLayout(importance_box);
  importance_layout->setContentsMargins(0, 0, 0, 0);
  importance_layout->addWidget(importance_, 1);
  importance_layout->addWidget(importance_note);

  // The slice plot: the tail loss against one swept parameter, every trial a point.
  slice_param_ = new QComboBox(this);
  slice_param_->setObjectName("analysis:slice_param");
  slice_ = new QCustomPlot(this);
  slice_->setObjectName("plot:slice");
  slice_->setMinimumSize(320, 220);
  slice_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  slice_->yAxis->setLabel("tail loss");
  auto* slice_box = new QWidget(this);
  auto* slice_layout = new QVBoxLayout(slice_box);
  slice_layout->setContentsMargins(0, 0, 0, 0);
  auto* slice_controls = new QHBoxLayout;
  slice_controls->addWidget(new QLabel("Tail loss against", this));
  slice_controls->addWidget(slice_param_, 1);
  slice_layout->addLayout(slice_controls);
  slice_layout->addWidget(slice_, 1);
  connect(slice_param_, &QComboBox::currentIndexChanged, this, &AnalysisPage::draw_slice);

  // The search as it went (the best so far per trial) beside the tail loss's distribution over the trials.
  history_ = make_plot("Optimization history", "tail loss", this);
  history_->setObjectName("plot:history");
  distribution_ = make_plot("Empirical distribution", "share of trials at or below", this);
  distribution_->setObjectName("plot:distribution");
  auto* history_box = new QSplitter(this);
  history_box->setObjectName("analysis:history");
  history_box->addWidget(history_);
  history_box->addWidget(distribution_);

  views_ = new QTabWidget(this);
  views_->setObjectName("analysis:views");
  views_->addTab(plots, "Pareto and heatmap");
  views_->addTab(slice_box, "Slices");
  views_->addTab(parallel_box, "Parallel coordinates");
  views_->addTab(importance_box, "Parameter importance");
  views_->addTab(history_box, "History and distribution");
  // Every swept parameter against the tail loss and the step time, a panel each.
  scatter_ = new QCustomPlot(this);
  scatter_->setObjectName("plot:scatter_matrix");
  scatter_->setMinimumSize(320, 220);
  views_->addTab(scatter_, "Scatter matrix");
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter_ = splitter;
  splitter->setObjectName("analysis:splitter");
  splitter->addWidget(views_);
  splitter->addWidget(what_if_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addWidget(note_);
  layout->addWidget(splitter, 1);

  connect(scope_, &QComboBox::currentIndexChanged, this, [this] {
    wanted_sweep_ = scope_->currentData().toLongLong();  // the user's choice outlives a visit to another page
    if (wanted_sweep_ == offered_sweep_) newer_sweep_->hide();
    analyse();
  });
  connect(link_, &QComboBox::currentIndexChanged, this, &AnalysisPage::analyse);
  connect(nodes_, &QSpinBox::valueChanged, this, &AnalysisPage::analyse);
  connect(ranks_per_node_, &QSpinBox::valueChanged, this, &AnalysisPage::analyse);
  connect(compute_scale_, &QDoubleSpinBox::valueChanged, this, &AnalysisPage::analyse);
  connect(tolerance_, &QDoubleSpinBox::valueChanged, this, [this](double percent) {
    QSettings().setValue(kToleranceKey, percent);
    analyse();
  });
  connect(x_metric_, &QComboBox::currentIndexChanged, this, &AnalysisPage::draw_pareto);
  connect(heat_x_, &QComboBox::currentIndexChanged, this, &AnalysisPage::draw_heatmap);
  connect(heat_y_, &QComboBox::currentIndexChanged, this, &AnalysisPage::draw_heatmap);
  connect(refresh_button, &QPushButton::clicked, this, &AnalysisPage::refresh);
  pareto_view_ = std::make_unique<ParetoView>(pareto_);
  heatmap_view_ = std::make_unique<HeatmapView>(heatmap_, font().family());
  slice_view_ = std::make_unique<SliceView>(slice_);
  importance_view_ = std::make_unique<ImportanceView>(importance_, importance_note_);
  history_view_ = std::make_unique<HistoryView>(history_);
  scatter_view_ = std::make_unique<ScatterMatrixView>(scatter_);
  scatter_readout_ = new PlotReadout(scatter_, [this](const QPointF& at) { return scatter_view_->hit(at); });
  distribution_view_ = std::make_unique<DistributionView>(distribution_);
  history_readout_ = new PlotReadout(history_, [this](const QPointF& at) { return history_view_->hit(at); });
  distribution_readout_ =
      new PlotReadout(distribution_, [this](const QPointF& at) { return distribution_view_->hit(at); });
  pareto_readout_ = new PlotReadout(pareto_, [this](const QPointF& at) { return pareto_view_->hit(at); });
  heatmap_readout_ = new PlotReadout(heatmap_, [this](const QPointF& at) { return heatmap_view_->hit(at); });
  slice_readout_ = new PlotReadout(slice_, [this](const QPointF& at) { return slice_view_->hit(at); });
  importance_readout_ = new PlotReadout(importance_, [this](const QPointF& at) { return importance_view_->hit(at); });
  for (auto* readout : {pareto_readout_, heatmap_readout_, slice_readout_, history_readout_, scatter_readout_})
    connect(readout, &PlotReadout::clicked, this, &AnalysisPage::open_runs_requested);
  apply_theme(current_theme());
}

AnalysisPage::~AnalysisPage() = default;

std::vector<QCustomPlot*> AnalysisPage::plots() const {
  return {pareto_, heatmap_, parallel_->plot(), importance_, slice_, history_, distribution_, scatter_};
}

std::int64_t AnalysisPage::shown_sweep() const { return scope_->currentData().toLongLong(); }

void AnalysisPage::select_sweep(std::int64_t sweep_id) {
  wanted_sweep_ = sweep_id;
  const int index = scope_->findData(QVariant::fromValue<qlonglong>(sweep_id));
  if (index >= 0) scope_->setCurrentIndex(index);
}

void AnalysisPage::refresh() {
  if (!QFileInfo::exists(store_path_)) {
    note_->setText("No runs yet: start one on the Launch page (Ctrl+R); sweeps are analysed here.");
    return;
  }
  ++pending_;
  run_async(
      this, [path = store_path_.toStdString()] { return db::Store(path, db::Store::Access::ReadOnly).sweeps(); },
      [this](const Outcome<std::vector<db::SweepRecord>>& out) {
        --pending_;
        if (!out.value) return note_->setText("Cannot read the run store: " + out.error);
        // A sweep that appeared since the last read (started here, by the CLI or another app) is shown when
        // the page shows its default, the newest; a sweep the user chose stays, and the new one is offered.
        const std::int64_t newest = out.value->empty() ? 0 : out.value->back().id;
        const bool appeared = newest_sweep_ >= 0 && newest > newest_sweep_;
        newest_sweep_ = newest;
        auto keep = wanted_sweep_ >= 0 ? QVariant::fromValue<qlonglong>(wanted_sweep_) : scope_->currentData();
        if (appeared && wanted_sweep_ < 0) {
          keep = QVariant::fromValue<qlonglong>(newest);
        } else if (appeared && wanted_sweep_ != newest) {
          offered_sweep_ = newest;
          newer_sweep_->setText(QString("Show sweep %1, new").arg(newest));
          newer_sweep_->show();
        }
        {
          QSignalBlocker block(scope_);
          scope_->clear();
          for (auto it = out.value->rbegin(); it != out.value->rend(); ++it) {
            scope_->addItem(QString("Sweep %1%2 (%3)")
                                .arg(it->id)
                                .arg(it->name.empty() ? QString() : ": " + QString::fromStdString(it->name),
                                     QString::fromStdString(it->status)),
                            QVariant::fromValue<qlonglong>(it->id));
            scope_->setItemData(scope_->count() - 1, QString::fromStdString(it->status), Qt::UserRole + 1);
          }
          scope_->addItem("All stored runs", QVariant::fromValue<qlonglong>(0));
          const int index = scope_->findData(keep);
          scope_->setCurrentIndex(index >= 0 ? index : 0);
        }
        analyse();
      });
}

void AnalysisPage::analyse() {
  if (!scope_->count()) return;
  const auto status = scope_->currentData(Qt::UserRole + 1).toString();
  resume_->setEnabled(status == db::status::kCancelled || status == db::status::kInterrupted ||
                      status == db::status::kFailed);
  to_dashboard_->setEnabled(scope_->currentData().toLongLong() > 0);  // a sweep, not every stored run
  SweepAnalysisQuery q;
  q.sweep_id = scope_->currentData().toLongLong();
  q.link = link_->currentText().toStdString();
  q.nodes = nodes_->value();
  q.ranks_per_node = ranks_per_node_->value();
  if (compute_scale_->value() != 1) {
    q.compute.kind = TargetCompute::Kind::Scaled;
    q.compute.scale = compute_scale_->value();
  }
  q.tolerance = tolerance_->value() / 100;
  const int generation = ++generation_;
  note_->setText("Analysing…");
  ++pending_;
  run_async(
      this, [q, path = store_path_.toStdString()] { return analyse_sweep(db::Store(path, db::Store::Access::ReadOnly), q); },
      [this, generation](const Outcome<SweepAnalysis>& out) {
        --pending_;
        if (generation != generation_) return;  // a newer request is on its way
        if (out.value) {
          data_ = *out.value;
        } else {
          data_ = SweepAnalysis{};
          data_.note = out.error.toStdString();
        }
        // The what-if table's intervals include the run-to-run spread: say which one (as recommend prints it).
        note_->setText(QString::fromStdString(
            data_.networks.empty() ? data_.note : data_.note + (data_.note.empty() ? "" : "\n") + data_.run_to_run));
        {
          // The same sweep analysed again (another tolerance, cluster): the heatmap keeps its parameters.
          const auto kept_x = heat_x_->currentText(), kept_y = heat_y_->currentText();
          QSignalBlocker bx(heat_x_), by(heat_y_);
          heat_x_->clear();
          heat_y_->clear();
          for (const auto& a : data_.axes) {
            heat_x_->addItem(QString::fromStdString(a));
            heat_y_->addItem(QString::fromStdString(a));
          }
          const auto [x, y] = default_heatmap_axes(data_);
          // One swept parameter (or every stored run) has no pair to offer: not the same one on both axes.
          heat_x_->setEnabled(data_.axes.size() >= 2);
          heat_y_->setEnabled(data_.axes.size() >= 2);
          const bool keep = kept_x != kept_y && heat_x_->findText(kept_x) >= 0 && heat_y_->findText(kept_y) >= 0;
          heat_x_->setCurrentText(keep ? kept_x : QString::fromStdString(x));
          heat_y_->setCurrentText(keep ? kept_y : QString::fromStdString(y));
          const auto kept_slice = slice_param_->currentText();
          QSignalBlocker bs(slice_param_);
          slice_param_->clear();
          for (const auto& a : data_.axes) slice_param_->addItem(QString::fromStdString(a));
          if (slice_param_->findText(kept_slice) >= 0) slice_param_->setCurrentText(kept_slice);
        }
        draw_pareto();
        draw_heatmap();
        draw_slice();
        fill_what_if();
        fill_parallel();
        draw_importance();
        draw_history();
        Q_EMIT analysed();
      });
}

void AnalysisPage::apply_theme(const Theme& t) {
  for (auto* plot : {pareto_, heatmap_, importance_, slice_, history_, distribution_}) {
    style_plot(plot, t);
    plot->replot();
  }
  parallel_->apply_theme(t);
  draw_pareto();
  draw_heatmap();  // its colour scale's axis too
  draw_slice();
  draw_importance();
  draw_history();
}

void AnalysisPage::fill_parallel() {
  std::vector<QString> axes;
  for (const auto& a : data_.axes) axes.push_back(short_param_name(QString::fromStdString(a)));
  axes.insert(axes.end(), {"tail loss", "ms/step", "MB/step"});
  std::vector<ParallelCoordinates::Line> lines;
  auto text = [](const std::optional<double>& v) { return v ? QString::number(*v, 'g', 6) : QString(); };
  for (const auto& p : data_.runs) {
    ParallelCoordinates::Line line{p.run_id, {}, p.loss};
    for (const auto& a : data_.axes) {
      const auto it = p.axis_values.find(a);
      line.values.push_back(it == p.axis_values.end() ? QString() : QString::fromStdString(it->second));
    }
    line.values.push_back(std::isfinite(p.loss) ? QString::number(p.loss, 'g', 6) : QString());
    line.values.push_back(text(p.step_ms));
    line.values.push_back(text(p.wire_mb));
    lines.push_back(std::move(line));
  }
  parallel_->set_data(axes, lines);
  fill_parallel_table();
}

void AnalysisPage::fill_parallel_table() {
  const auto kept = parallel_->matching_runs();
  QStringList headers{"run", "label"};
  for (const auto& a : data_.axes) headers << short_param_name(QString::fromStdString(a));
  headers << "tail loss" << "ms/step" << "MB/step";
  parallel_table_->setSortingEnabled(false);
  parallel_table_->clear();
  parallel_table_->setColumnCount(static_cast<int>(headers.size()));
  parallel_table_->setHorizontalHeaderLabels(headers);
  parallel_table_->setRowCount(0);
  // A number rounded to `precision` decimals but kept a number, so the column sorts numerically.
  auto number = [](double v, int precision) {
    auto* item = new QTableWidgetItem;
    item->setData(Qt::DisplayRole, std::isfinite(v) ? QVariant(QString::number(v, 'f', precision).toDouble())
                                                    : QVariant(QString::number(v)));
    return item;
  };
  for (const auto& p : data_.runs) {
    if (!std::count(kept.begin(), kept.end(), p.run_id)) continue;
    const int row = parallel_table_->rowCount();
    parallel_table_->insertRow(row);
    int c = 0;
    parallel_table_->setItem(row, c++, number(static_cast<double>(p.run_id), 0));
    parallel_table_->setItem(row, c++, new QTableWidgetItem(QString::fromStdString(p.label)));
    for (const auto& a : data_.axes) {
      const auto it = p.axis_values.find(a);
      parallel_table_->setItem(row, c++, new QTableWidgetItem(it == p.axis_values.end() ? QString("–") : QString::fromStdString(it->second)));
    }
    parallel_table_->setItem(row, c++, number(p.loss, 5));
    parallel_table_->setItem(row, c++, p.step_ms ? number(*p.step_ms, 2) : new QTableWidgetItem("–"));
    parallel_table_->setItem(row, c++, p.wire_mb ? number(*p.wire_mb, 3) : new QTableWidgetItem("–"));
  }
  parallel_table_->setSortingEnabled(true);
  parallel_table_->resizeColumnsToContents();
}

void AnalysisPage::draw_pareto() {
  pareto_view_->draw(data_, x_metric_->currentIndex() == 1, link_->currentText(), font().family());
  pareto_front_ = pareto_view_->front();
}

void AnalysisPage::draw_heatmap() {
  heatmap_view_->draw(data_, heat_x_->currentText().toStdString(), heat_y_->currentText().toStdString());
}

void AnalysisPage::draw_slice() { slice_view_->draw(data_, slice_param_->currentText().toStdString()); }

void AnalysisPage::draw_importance() { importance_view_->draw(data_.importance, loss_correlations(data_)); }

void AnalysisPage::draw_history() {
  const auto history = optimization_history(data_);
  history_view_->draw(history);
  distribution_view_->draw(empirical_distribution(data_), history.baseline_loss);
  scatter_view_->draw(scatter_matrix(data_));  // its panels in the theme too
}

void AnalysisPage::fill_what_if() {
  what_if_->setRowCount(0);
  for (const auto& row : data_.networks) {
    const int r = what_if_->rowCount();
    what_if_->insertRow(r);
    what_if_->setItem(r, 0, new QTableWidgetItem(QString::fromStdString(row.network)));
    // Which baseline: with one per learning rate, the chosen configuration's own, named, since the column
    // changes with the tolerance and would not otherwise say why.
    auto* baseline = cell(row.baseline_ms, 1);
    if (row.baseline_run) baseline->setText(baseline->text() + QString(" (run %1)").arg(*row.baseline_run));
    what_if_->setItem(r, 1, baseline);
    what_if_->setItem(r, 2, new QTableWidgetItem(QString::fromStdString(row.best)));
    what_if_->setItem(r, 3, cell(row.best_ms, 1));
    QString speedup = "–";
    if (row.speedup) {
      // The digits that keep each figure on its side of 1.0, as the verdict prints them (recommend.h).
      const auto text = [](double x) { return QString::fromStdString(digits_beside(x, {1.0})); };
      speedup = text(row.speedup->value) + "×";
      if (row.speedup->has_interval())
        speedup += QString(" (%1–%2)").arg(text(row.speedup->low), text(row.speedup->high));
    }
    what_if_->setItem(r, 4, new QTableWidgetItem(speedup));
    what_if_->setItem(r, 5, new QTableWidgetItem(QString::fromStdString(row.verdict)));
    QString tip = QString::fromStdString(row.verdict);
    if (!row.reasons.empty()) tip += "\n\nEach candidate, fastest predicted first:";
    for (const auto& reason : row.reasons) tip += "\n• " + QString::fromStdString(reason);
    if (row.reasons_left) tip += QString("\n… and %1 more (recommend --sweep lists them all)").arg(row.reasons_left);
    for (const auto& note : row.slowmo) tip += "\n" + QString::fromStdString(note);
    what_if_->item(r, 5)->setToolTip(tip);
  }
  for (int c = 0; c < 5; ++c) what_if_->resizeColumnToContents(c);
  fit_what_if();
}

void AnalysisPage::fit_what_if() {
  // Rows as tall as their wrapped verdicts, and every network's row in view, whatever the splitter above was
  // left at, a 1000 px window included.
  // A smaller window (a laptop's 768 px) keeps a few lines and scrolls the rest: a least height that followed
  // the wrapped rows would grow the window (to 1384 px at 1920x1080) while the verdicts are laid out narrow.
  what_if_->resizeRowsToContents();
  int least = what_if_->horizontalHeader()->sizeHint().height() + 2 * what_if_->frameWidth();
  if (what_if_->horizontalScrollBar()->isVisible()) least += what_if_->horizontalScrollBar()->sizeHint().height();
  int needed = least;
  for (int r = 0; r < what_if_->rowCount(); ++r) needed += what_if_->rowHeight(r);
  least += 4 * what_if_->fontMetrics().lineSpacing();
  what_if_->setMinimumHeight(std::min(least, needed));
  const auto sizes = splitter_->sizes();
  const int total = sizes.value(0) + sizes.value(1);
  // The table as tall as its rows when the page has room, the views above taking the rest.
  if (total <= 0 || sizes.value(1) == needed) return;
  const int table = std::max(least, std::min(needed, total - views_->minimumSizeHint().height()));
  splitter_->setSizes({total - table, table});
}

void AnalysisPage::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fit_what_if();  // the room the window has now
}

}  // namespace commtune::ui

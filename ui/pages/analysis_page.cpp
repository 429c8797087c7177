#include "ui/pages/analysis_page.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
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

#include "core/netmodel/cost_model.h"
#include "core/verdict/pareto.h"
#include "core/verdict/recommend.h"
#include "core/store/run_metrics.h"
#include "core/sweep/sweep_spec.h"
#include "core/verdict/evidence.h"
#include "db/store.h"
#include "ui/async.h"
#include "ui/forms/param_field.h"
#include "ui/plot/parallel_coordinates.h"
#include "ui/plot/plot_readout.h"
#include "ui/plot/run_plots.h"
#include "ui/theme.h"

namespace commtune::ui {

namespace {

struct Query {
  std::string path;
  std::int64_t sweep_id = 0;  // 0: every run
  std::string link;
  int nodes = 0;  // 0: one per rank of the run
  int ranks_per_node = 1;
  double compute_scale = 1;  // the target's compute time as a multiple of the measured
  double tolerance = 0.01;   // the recommendation's relative loss tolerance
};

TargetCompute target_compute(const Query& q) {
  TargetCompute compute;
  if (q.compute_scale != 1) {
    compute.kind = TargetCompute::Kind::Scaled;
    compute.scale = q.compute_scale;
  }
  return compute;
}

net::Cluster cluster_for(const Query& q, const std::string& link, int world_size) {
  return net::Cluster::of(net::link_preset(link, "network"), world_size, q.ranks_per_node, q.nodes);
}

AnalysisData compute(const Query& q) {
  db::Store store(q.path, db::Store::Access::ReadOnly);
  db::RunFilter filter;
  if (q.sweep_id) filter.sweep_id = q.sweep_id;
  filter.statuses = measured_statuses();
  AnalysisData out;
  if (q.sweep_id)
    if (const auto sweep = store.sweep(q.sweep_id))
      for (const auto& axis : SweepSpec::parse(sweep->spec).axes) {
        out.axes.push_back(axis.param);
        if (axis.log) out.log_axes.insert(axis.param);
      }
  const auto runs = store.runs(filter);
  std::vector<std::int64_t> ids;
  for (const auto& run : runs) ids.push_back(run.id);
  // One read of every run; the pooled compute and the intervals serve every network below.
  const auto evidence = Evidence::gather(store, ids);
  int world_size = 1;
  const auto compute = target_compute(q);
  for (const auto& run : runs) {
    const auto digest = digest_run(store, run.id);
    if (!digest.loss) continue;
    const auto c = evidence.configuration_of(run.id);
    AnalysisPoint p;
    p.run_id = run.id;
    p.label = QString::fromStdString(run_label(run));
    p.loss = *digest.loss;
    p.wire_mb = digest.wire_mb;
    p.step_ms = digest.step_ms;
    p.loss_mean = p.loss;
    world_size = static_cast<int>(run.world_size);
    if (c) {
      const auto& config = evidence.configurations()[*c];
      p.configuration_run = config.runs.front();
      p.seeds = static_cast<int>(config.runs.size());
      p.loss_mean = config.mean_loss();
      p.loss_sd = config.loss_sd();
      const auto baseline = evidence.baseline_of(*c);
      p.baseline = baseline && *baseline == *c;
      if (evidence.profile_problem(*c).empty()) {
        const auto step = evidence.predicted_step_s(*c, cluster_for(q, q.link, world_size), compute);
        p.predicted_ms = 1e3 * step.value;
        if (step.has_interval()) p.predicted_interval_ms = {1e3 * step.low, 1e3 * step.high};
      }
    }
    for (const auto& [name, value] : store.params(run.id))
      if (std::count(out.axes.begin(), out.axes.end(), name)) p.axis_values[name] = value_text(value);
    out.points.push_back(std::move(p));
  }
  QStringList diverged;
  for (const auto& p : out.points)
    if (!std::isfinite(p.loss)) diverged << QString::number(p.run_id);
  if (!diverged.isEmpty())
    out.note = QString("Diverged (a NaN or infinite loss), so ranked worst and left off the Pareto plot: run %1. ")
                   .arg(diverged.join(", "));
  {
    std::vector<Trial> trials;
    for (const auto& p : out.points) {
      if (p.baseline) continue;  // allreduce is the reference, not a point of the swept space
      Trial t{{}, p.loss};
      for (const auto& axis : out.axes) {
        const auto it = p.axis_values.find(axis);
        t.values.push_back(it == p.axis_values.end() ? std::string() : it->second.toStdString());
      }
      trials.push_back(std::move(t));
    }
    out.importance = parameter_importance(out.axes, trials);
  }
  if (out.points.empty()) {
    out.note =
        q.sweep_id ? "This sweep has no finished trials yet." : "No finished runs yet: start one on the Launch page.";
    return out;
  }
  if (std::none_of(out.points.begin(), out.points.end(), [](const AnalysisPoint& p) { return p.baseline; })) {
    out.note += "No allreduce baseline among these runs: the what-if table needs one (sweeps add it with \"baseline\").";
    return out;
  }
  for (const auto& link : net::link_presets()) {
    WhatIfRow row;
    row.network = QString::fromStdString(link.name);
    try {
      RecommendOptions options;
      options.cluster = cluster_for(q, link.name, world_size);
      options.compute = compute;
      options.tolerance = q.tolerance;
      row.network = QString::fromStdString(options.cluster.describe());
      const auto r = recommend(evidence, options);
      row.verdict = QString::fromStdString(r.verdict);
      for (const auto& c : r.candidates) {
        if (c.run_id == r.baseline_run) row.baseline_ms = c.step_s.value * 1e3;
        if (r.chosen_run && c.run_id == *r.chosen_run) {
          row.best = QString("%1 %2").arg(c.run_id).arg(QString::fromStdString(c.label));
          row.best_ms = c.step_s.value * 1e3;
          row.speedup = c.speedup;
        }
      }
      if (!r.chosen_run) row.best = "keep allreduce";
    } catch (const std::exception& e) {
      row.verdict = QString::fromUtf8(e.what());
    }
    out.what_if.push_back(std::move(row));
  }
  return out;
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
  tolerance_->setValue(1);
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
  connect(resume_, &QPushButton::clicked, this,
          [this] { Q_EMIT resume_requested(scope_->currentData().toLongLong()); });

  auto* controls = new QFormLayout;
  controls->addRow("Runs", scope_);
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
  what_if_->horizontalHeader()->setSectionResizeMode(5, QHeaderView::Stretch);
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

  views_ = new QTabWidget(this);
  views_->setObjectName("analysis:views");
  views_->addTab(plots, "Pareto and heatmap");
  views_->addTab(slice_box, "Slices");
  views_->addTab(parallel_box, "Parallel coordinates");
  views_->addTab(importance_box, "Parameter importance");
  auto* splitter = new QSplitter(Qt::Vertical, this);
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
    analyse();
  });
  connect(link_, &QComboBox::currentIndexChanged, this, &AnalysisPage::analyse);
  connect(nodes_, &QSpinBox::valueChanged, this, &AnalysisPage::analyse);
  connect(ranks_per_node_, &QSpinBox::valueChanged, this, &AnalysisPage::analyse);
  connect(compute_scale_, &QDoubleSpinBox::valueChanged, this, &AnalysisPage::analyse);
  connect(tolerance_, &QDoubleSpinBox::valueChanged, this, &AnalysisPage::analyse);
  connect(x_metric_, &QComboBox::currentIndexChanged, this, &AnalysisPage::draw_pareto);
  connect(heat_x_, &QComboBox::currentIndexChanged, this, &AnalysisPage::draw_heatmap);
  connect(heat_y_, &QComboBox::currentIndexChanged, this, &AnalysisPage::draw_heatmap);
  connect(refresh_button, &QPushButton::clicked, this, &AnalysisPage::refresh);
  pareto_readout_ = new PlotReadout(pareto_, [this](const QPointF& at) { return pareto_hit(at); });
  heatmap_readout_ = new PlotReadout(heatmap_, [this](const QPointF& at) { return heatmap_hit(at); });
  slice_readout_ = new PlotReadout(slice_, [this](const QPointF& at) { return slice_hit(at); });
  importance_readout_ = new PlotReadout(importance_, [this](const QPointF& at) { return importance_hit(at); });
  for (auto* readout : {pareto_readout_, heatmap_readout_, slice_readout_})
    connect(readout, &PlotReadout::clicked, this, &AnalysisPage::open_runs_requested);
  apply_theme(current_theme());
}

std::vector<QCustomPlot*> AnalysisPage::plots() const {
  return {pareto_, heatmap_, parallel_->plot(), importance_, slice_};
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
        // A sweep that appeared since the last read (started here, by the CLI or
        // another app) is what the user wants to see next.
        const std::int64_t newest = out.value->empty() ? 0 : out.value->back().id;
        if (newest_sweep_ >= 0 && newest > newest_sweep_) wanted_sweep_ = newest;
        newest_sweep_ = newest;
        const auto keep = wanted_sweep_ >= 0 ? QVariant::fromValue<qlonglong>(wanted_sweep_) : scope_->currentData();
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
  Query q{store_path_.toStdString(), scope_->currentData().toLongLong(), link_->currentText().toStdString(),
          nodes_->value(), ranks_per_node_->value(), compute_scale_->value(), tolerance_->value() / 100};
  const int generation = ++generation_;
  note_->setText("Analysing…");
  ++pending_;
  run_async(
      this, [q] { return compute(q); },
      [this, generation](const Outcome<AnalysisData>& out) {
        --pending_;
        if (generation != generation_) return;  // a newer request is on its way
        if (out.value) {
          data_ = *out.value;
        } else {
          data_ = AnalysisData{};
          data_.note = out.error;
        }
        note_->setText(data_.note);
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
        Q_EMIT analysed();
      });
}

void AnalysisPage::apply_theme(const Theme& t) {
  for (auto* plot : {pareto_, heatmap_, importance_, slice_}) {
    style_plot(plot, t);
    plot->replot();
  }
  parallel_->apply_theme(t);
  draw_pareto();
  draw_slice();
  draw_importance();
}

void AnalysisPage::fill_parallel() {
  std::vector<QString> axes;
  for (const auto& a : data_.axes) axes.push_back(short_param_name(QString::fromStdString(a)));
  axes.insert(axes.end(), {"tail loss", "ms/step", "MB/step"});
  std::vector<ParallelCoordinates::Line> lines;
  auto text = [](const std::optional<double>& v) { return v ? QString::number(*v, 'g', 6) : QString(); };
  for (const auto& p : data_.points) {
    ParallelCoordinates::Line line{p.run_id, {}, p.loss};
    for (const auto& a : data_.axes) {
      const auto it = p.axis_values.find(a);
      line.values.push_back(it == p.axis_values.end() ? QString() : it->second);
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
  for (const auto& p : data_.points) {
    if (!std::count(kept.begin(), kept.end(), p.run_id)) continue;
    const int row = parallel_table_->rowCount();
    parallel_table_->insertRow(row);
    int c = 0;
    parallel_table_->setItem(row, c++, number(static_cast<double>(p.run_id), 0));
    parallel_table_->setItem(row, c++, new QTableWidgetItem(p.label));
    for (const auto& a : data_.axes) {
      const auto it = p.axis_values.find(a);
      parallel_table_->setItem(row, c++, new QTableWidgetItem(it == p.axis_values.end() ? "–" : it->second));
    }
    parallel_table_->setItem(row, c++, number(p.loss, 5));
    parallel_table_->setItem(row, c++, p.step_ms ? number(*p.step_ms, 2) : new QTableWidgetItem("–"));
    parallel_table_->setItem(row, c++, p.wire_mb ? number(*p.wire_mb, 3) : new QTableWidgetItem("–"));
  }
  parallel_table_->setSortingEnabled(true);
  parallel_table_->resizeColumnsToContents();
}

void AnalysisPage::draw_importance() {
  importance_->clearPlottables();
  importance_->clearItems();
  const Theme t = current_theme();
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  auto* bars = new QCPBars(importance_->xAxis, importance_->yAxis);
  bars->setPen(QPen(t.series_color(0)));
  bars->setBrush(t.series_color(0));
  bars->setWidth(0.6);
  const auto& shares = data_.importance.shares;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    const auto& imp = shares[i];
    ticker->addTick(static_cast<double>(i), QString::fromStdString(imp.param));
    bars->addData(static_cast<double>(i), imp.share);
    auto* value = new QCPItemText(importance_);
    value->position->setCoords(static_cast<double>(i), imp.share);
    value->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    value->setText(imp.kind == Importance::Kind::Parameter
                       ? QString("%1% (%2 values)").arg(100 * imp.share, 0, 'f', 1).arg(imp.groups)
                       : QString("%1%").arg(100 * imp.share, 0, 'f', 1));
    value->setColor(t.foreground);
  }
  importance_note_->setText(
      QString::fromStdString(data_.importance.method) +
      (shares.empty() ? QString() : " The shares add up to 100% of the tail loss's variance; allreduce baselines and "
                                    "diverged trials are left out."));
  importance_->xAxis->setTicker(ticker);
  importance_->xAxis->setRange(-0.6, std::max<double>(1, static_cast<double>(shares.size())) - 0.4);
  importance_->xAxis->setLabel(shares.empty() ? "needs a sweep with 3 or more finished trials" : "");
  importance_->replot();
}

void AnalysisPage::draw_pareto() {
  pareto_->clearGraphs();
  pareto_->clearItems();
  pareto_points_.clear();
  const bool by_time = x_metric_->currentIndex() == 1;
  pareto_->xAxis->setLabel(by_time ? QString("predicted step time on %1 (ms)").arg(link_->currentText())
                                   : QString("MB on the wire per step per rank"));
  const Theme t = current_theme();
  // One point per configuration: its seeds' mean loss, their spread as an
  // error bar; the order and the front are core/verdict/pareto.h's, as
  // `compare` lists them.
  std::map<std::int64_t, const AnalysisPoint*> by_configuration;
  std::vector<TradeOff> candidates;
  for (const auto& p : data_.points) {
    const auto id = p.configuration_run ? p.configuration_run : p.run_id;
    if (!by_configuration.emplace(id, &p).second) continue;
    if (const auto x = by_time ? p.predicted_ms : p.wire_mb) candidates.push_back({id, *x, p.loss_mean});
  }
  const auto ordered = pareto_order(std::move(candidates));
  pareto_front_ = pareto_front(ordered);
  auto* all = pareto_->addGraph();
  all->setLineStyle(QCPGraph::lsNone);
  all->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, t.series_color(0), 7));
  auto* spread = new QCPErrorBars(pareto_->xAxis, pareto_->yAxis);
  spread->setDataPlottable(all);
  spread->setPen(QPen(t.series_color(0)));
  auto* front = pareto_->addGraph();
  front->setPen(QPen(t.series_color(1), 1.5));
  front->setLineStyle(QCPGraph::lsStepLeft);
  front->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(t.series_color(1), 2), QBrush(), 11));
  QVector<double> errors;
  std::vector<std::pair<double, const AnalysisPoint*>> labelled;  // the front and the baseline
  for (const auto& [point, on_front] : ordered) {
    const auto* p = by_configuration.at(point.run_id);
    const double x = point.cost;
    all->addData(x, p->loss_mean);
    pareto_points_.push_back(p);
    errors.push_back(std::isnan(p->loss_sd) ? 0.0 : p->loss_sd);
    if (on_front) front->addData(x, p->loss_mean);
    if (on_front || p->baseline) labelled.emplace_back(x, p);
  }
  spread->setData(errors);
  // Compressed runs send orders of magnitude less than allreduce: bytes on a log axis.
  pareto_->xAxis->setScaleType(by_time ? QCPAxis::stLinear : QCPAxis::stLogarithmic);
  pareto_->xAxis->setTicker(by_time ? QSharedPointer<QCPAxisTicker>(new QCPAxisTicker)
                                    : QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog));
  pareto_->rescaleAxes();
  const auto xr = pareto_->xAxis->range();
  if (by_time)
    pareto_->xAxis->scaleRange(1.2);
  else if (xr.lower > 0)
    pareto_->xAxis->setRange(xr.lower / 3, xr.upper * 6);  // room for the labels right of the points
  pareto_->yAxis->scaleRange(1.15);
  // Labels on the front and the baseline only (the rest read on hover), each
  // moved down past the ones placed before it so that none covers another.
  pareto_->replot(QCustomPlot::rpImmediateRefresh);  // the axes' pixel geometry
  const QFont label_font(font().family(), 8);
  const QFontMetrics metrics(label_font);
  std::vector<QRectF> placed;
  for (const auto& [x, p] : labelled) {
    const auto text = QString("%1%2%3")
                          .arg(p->configuration_run ? p->configuration_run : p->run_id)
                          .arg(p->seeds > 1 ? QString(" (%1 seeds)").arg(p->seeds) : QString())
                          .arg(p->baseline ? " allreduce" : "");
    const QPointF anchor(pareto_->xAxis->coordToPixel(x) + 5, pareto_->yAxis->coordToPixel(p->loss_mean) - 2);
    QRectF rect(anchor - QPointF(0, metrics.height()), QSizeF(metrics.horizontalAdvance(text) + 4, metrics.height()));
    for (int tries = 0; tries < 20 && std::any_of(placed.begin(), placed.end(),
                                                  [&](const QRectF& r) { return r.intersects(rect); });
         ++tries)
      rect.translate(0, metrics.height());
    placed.push_back(rect);
    auto* item = new QCPItemText(pareto_);
    item->setObjectName("pareto:label");
    // In plot coordinates, so that the label pans and zooms with its point.
    item->position->setCoords(pareto_->xAxis->pixelToCoord(rect.left()), pareto_->yAxis->pixelToCoord(rect.bottom()));
    item->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    item->setText(text);
    item->setColor(p->baseline ? t.series_color(3) : t.muted);
    item->setFont(label_font);
  }
  pareto_->replot();
}

std::optional<PlotHit> AnalysisPage::pareto_hit(const QPointF& pixel) const {
  // Every configuration under the pointer: points that fall together are read together.
  if (pareto_->graphCount() == 0) return std::nullopt;
  auto* all = pareto_->graph(0);
  PlotHit hit;
  QStringList lines;
  for (int i = 0; i < all->data()->size() && i < static_cast<int>(pareto_points_.size()); ++i) {
    const auto point = all->data()->at(i);
    const QPointF at(pareto_->xAxis->coordToPixel(point->key), pareto_->yAxis->coordToPixel(point->value));
    if (std::hypot(at.x() - pixel.x(), at.y() - pixel.y()) > 8) continue;
    const auto* p = pareto_points_[static_cast<std::size_t>(i)];
    const auto id = p->configuration_run ? p->configuration_run : p->run_id;
    hit.runs.push_back(id);
    QString loss = QString::number(p->loss_mean, 'g', 5);
    if (p->seeds > 1 && std::isfinite(p->loss_sd))
      loss += QString(" ± %1 (%2 seeds)").arg(p->loss_sd, 0, 'g', 2).arg(p->seeds);
    lines << QString("run %1 %2%3: %4 %5, tail loss %6")
                 .arg(id)
                 .arg(p->label, p->baseline ? " (allreduce baseline)" : "")
                 .arg(QString::number(point->key, 'g', 4),
                      x_metric_->currentIndex() == 1 ? QString("ms/step") : QString("MB/step"), loss);
  }
  if (lines.isEmpty()) return std::nullopt;
  hit.text = lines.join("\n");
  return hit;
}

void AnalysisPage::draw_contour(const std::string& xa, const std::string& ya) {
  heat_contour_ = true;
  heat_trials_.clear();
  struct Trial {
    double x, y, loss;
    const AnalysisPoint* point;
  };
  std::vector<Trial> trials;
  std::set<std::int64_t> seen;
  for (const auto& p : data_.points)
    if (p.axis_values.count(xa) && p.axis_values.count(ya) && std::isfinite(p.loss_mean) &&
        seen.insert(p.configuration_run ? p.configuration_run : p.run_id).second)
      trials.push_back({*finite_number(p.axis_values.at(xa)), *finite_number(p.axis_values.at(ya)), p.loss_mean, &p});
  if (trials.size() < 2) return heatmap_->replot();
  // Each parameter on the scale the sweep drew it on (a range with `log`).
  const auto span = [&](auto member, const std::string& name) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& t : trials) lo = std::min(lo, t.*member), hi = std::max(hi, t.*member);
    return std::make_tuple(lo, hi, lo > 0 && data_.log_axes.count(name) > 0);
  };
  const auto [x_lo, x_hi, x_log] = span(&Trial::x, xa);
  const auto [y_lo, y_hi, y_log] = span(&Trial::y, ya);
  const auto to_unit = [](double v, double lo, double hi, bool log) {
    if (hi <= lo) return 0.5;
    return log ? std::log(v / lo) / std::log(hi / lo) : (v - lo) / (hi - lo);
  };
  // Inverse-distance weighting (power 2) in the unit square, then 8 levels: a filled contour.
  constexpr int kCells = 60, kLevels = 8;
  double loss_lo = INFINITY, loss_hi = -INFINITY;
  for (const auto& t : trials) loss_lo = std::min(loss_lo, t.loss), loss_hi = std::max(loss_hi, t.loss);
  auto* map = new QCPColorMap(heatmap_->xAxis, heatmap_->yAxis);
  map->setObjectName("heatmap:contour");
  map->data()->setSize(kCells, kCells);
  map->data()->setRange(QCPRange(0, 1), QCPRange(0, 1));
  for (int i = 0; i < kCells; ++i)
    for (int j = 0; j < kCells; ++j) {
      const double u = (i + 0.5) / kCells, v = (j + 0.5) / kCells;
      double weights = 0, sum = 0;
      for (const auto& t : trials) {
        const double du = u - to_unit(t.x, x_lo, x_hi, x_log), dv = v - to_unit(t.y, y_lo, y_hi, y_log);
        const double w = 1.0 / std::max(1e-9, du * du + dv * dv);
        weights += w;
        sum += w * t.loss;
      }
      const double value = sum / weights;
      const double level = loss_hi > loss_lo ? std::floor((value - loss_lo) / (loss_hi - loss_lo) * kLevels) : 0;
      map->data()->setCell(i, j, loss_lo + std::min<double>(kLevels - 1, level) * (loss_hi - loss_lo) / kLevels);
    }
  auto* scale = new QCPColorScale(heatmap_);
  heatmap_->plotLayout()->addElement(0, 1, scale);
  scale->axis()->setLabel("tail loss (8 levels between the trials)");
  map->setColorScale(scale);
  map->setGradient(viridis_gradient());
  map->setInterpolate(false);
  map->setDataRange(QCPRange(loss_lo, loss_hi > loss_lo ? loss_hi : loss_lo + 1));
  auto* points = heatmap_->addGraph();
  points->setObjectName("heatmap:trials");
  points->setLineStyle(QCPGraph::lsNone);
  points->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::white, 1.5), QBrush(Qt::black), 7));
  std::sort(trials.begin(), trials.end(), [&](const Trial& a, const Trial& b) {
    return to_unit(a.x, x_lo, x_hi, x_log) < to_unit(b.x, x_lo, x_hi, x_log);
  });
  for (const auto& t : trials) {
    points->addData(to_unit(t.x, x_lo, x_hi, x_log), to_unit(t.y, y_lo, y_hi, y_log));
    heat_trials_.push_back(t.point);
  }
  // Ticks in the parameters' own values along the unit square.
  const auto ticker = [&](double lo, double hi, bool log) {
    QSharedPointer<QCPAxisTickerText> t(new QCPAxisTickerText);
    std::vector<QString> texts;
    for (int k = 0; k <= 4; ++k)
      texts.push_back(QString::number(log ? lo * std::pow(hi / lo, k / 4.0) : lo + (hi - lo) * k / 4.0, 'g', 12));
    const auto labels = short_value_labels(texts);
    for (int k = 0; k <= 4; ++k) t->addTick(k / 4.0, labels[static_cast<std::size_t>(k)]);
    return t;
  };
  heatmap_->xAxis->setTicker(ticker(x_lo, x_hi, x_log));
  heatmap_->yAxis->setTicker(ticker(y_lo, y_hi, y_log));
  heatmap_->xAxis->setLabel(QString::fromStdString(xa) + (x_log ? " (log)" : ""));
  heatmap_->yAxis->setLabel(QString::fromStdString(ya) + (y_log ? " (log)" : ""));
  heatmap_->xAxis->setRange(-0.03, 1.03);
  heatmap_->yAxis->setRange(-0.03, 1.03);
  heatmap_->replot();
}

std::optional<PlotHit> AnalysisPage::heatmap_hit(const QPointF& pixel) const {
  if (heat_contour_) {
    const auto near = nearest_point(heatmap_, pixel);
    if (!near || near->index >= static_cast<int>(heat_trials_.size())) return std::nullopt;
    const auto* p = heat_trials_[static_cast<std::size_t>(near->index)];
    const auto id = p->configuration_run ? p->configuration_run : p->run_id;
    QStringList values;
    for (const auto& [name, value] : p->axis_values) values << QString::fromStdString(name) + " = " + value;
    return PlotHit{QString("run %1 %2: %3, tail loss %4")
                       .arg(id)
                       .arg(p->label, values.join(", "), QString::number(p->loss_mean, 'g', 5)),
                   {id}};
  }
  const int i = static_cast<int>(std::lround(heatmap_->xAxis->pixelToCoord(pixel.x())));
  const int j = static_cast<int>(std::lround(heatmap_->yAxis->pixelToCoord(pixel.y())));
  const auto it = heat_cells_.find({i, j});
  if (it == heat_cells_.end()) return std::nullopt;
  return it->second;
}

void AnalysisPage::draw_slice() {
  slice_->clearGraphs();
  slice_->clearItems();
  slice_points_.clear();
  const auto param = slice_param_->currentText().toStdString();
  slice_->xAxis->setLabel(param.empty() ? "a slice needs a swept parameter" : QString::fromStdString(param));
  // One point per configuration (its seeds' mean), in the order of its value.
  std::vector<const AnalysisPoint*> points;
  std::set<std::int64_t> seen;
  for (const auto& p : data_.points)
    if (p.axis_values.count(param) && std::isfinite(p.loss_mean) &&
        seen.insert(p.configuration_run ? p.configuration_run : p.run_id).second)
      points.push_back(&p);
  bool numeric = !points.empty();
  double lo = INFINITY, hi = -INFINITY;
  std::vector<QString> categories;
  for (const auto* p : points) {
    const auto& text = p->axis_values.at(param);
    if (const auto v = finite_number(text)) {
      lo = std::min(lo, *v);
      hi = std::max(hi, *v);
    } else {
      numeric = false;
    }
    if (std::find(categories.begin(), categories.end(), text) == categories.end()) categories.push_back(text);
  }
  std::sort(categories.begin(), categories.end(), [](const QString& a, const QString& b) {
    const auto da = finite_number(a), db = finite_number(b);
    return da && db ? *da < *db : a < b;
  });
  const auto x_of = [&](const AnalysisPoint& p) {
    const auto& text = p.axis_values.at(param);
    return numeric ? *finite_number(text)
                   : double(std::find(categories.begin(), categories.end(), text) - categories.begin());
  };
  std::stable_sort(points.begin(), points.end(), [&](const auto* a, const auto* b) { return x_of(*a) < x_of(*b); });
  const Theme t = current_theme();
  auto* trials = slice_->addGraph();
  trials->setLineStyle(QCPGraph::lsNone);
  trials->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, t.series_color(0), 7));
  const AnalysisPoint* best = nullptr;
  for (const auto* p : points) {
    trials->addData(x_of(*p), p->loss_mean);
    slice_points_.push_back(p);
    if (!best || p->loss_mean < best->loss_mean) best = p;
  }
  if (best) {
    auto* ring = slice_->addGraph();
    ring->setLineStyle(QCPGraph::lsNone);
    ring->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(t.series_color(1), 2), QBrush(), 13));
    ring->addData(x_of(*best), best->loss_mean);
  }
  const bool log = numeric && lo > 0 && hi / lo > 100;
  set_log_axis(slice_->xAxis, log);
  // Categories, and a grid's numbers (up to 8, as on the parallel coordinates),
  // label the axis with their values: no rank 2.5. Drawn values get a scale.
  if (!numeric || categories.size() <= 8) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const auto labels = short_value_labels(categories);
    for (std::size_t k = 0; k < categories.size(); ++k)
      ticker->addTick(numeric ? *finite_number(categories[k]) : double(k), labels[k]);
    slice_->xAxis->setTicker(ticker);
  }
  slice_->rescaleAxes();
  if (log)
    slice_->xAxis->setRange(lo / 1.5, hi * 1.5);
  else
    slice_->xAxis->scaleRange(1.15);
  slice_->yAxis->scaleRange(1.15);
  widen_flat_range(slice_->yAxis);
  slice_->replot();
}

std::optional<PlotHit> AnalysisPage::slice_hit(const QPointF& pixel) const {
  const auto near = nearest_point(slice_, pixel);
  if (!near || near->graph != slice_->graph(0) || near->index >= static_cast<int>(slice_points_.size()))
    return std::nullopt;
  const auto* p = slice_points_[static_cast<std::size_t>(near->index)];
  const auto id = p->configuration_run ? p->configuration_run : p->run_id;
  return PlotHit{QString("run %1 %2: %3 = %4, tail loss %5")
                     .arg(id)
                     .arg(p->label, slice_param_->currentText(),
                          p->axis_values.at(slice_param_->currentText().toStdString()),
                          QString::number(p->loss_mean, 'g', 5)),
                 {id}};
}

std::optional<PlotHit> AnalysisPage::importance_hit(const QPointF& pixel) const {
  const auto& shares = data_.importance.shares;
  const double x = importance_->xAxis->pixelToCoord(pixel.x());
  const double index = std::round(x);
  if (std::abs(x - index) > 0.3 || index < 0 || index >= static_cast<double>(shares.size())) return std::nullopt;
  const auto& imp = shares[static_cast<std::size_t>(index)];
  // Anywhere in the bar's column up to its top, so a thin bar can still be read.
  const double y = importance_->yAxis->pixelToCoord(pixel.y());
  if (y < importance_->yAxis->range().lower || y > std::max(imp.share, 0.05 * importance_->yAxis->range().size()))
    return std::nullopt;
  const auto share = QString::number(100 * imp.share, 'f', 1);
  switch (imp.kind) {
    case Importance::Kind::Parameter:
      return PlotHit{QString("%1: %2% of the tail loss's variance, between its %3 values")
                         .arg(QString::fromStdString(imp.param), share)
                         .arg(imp.groups),
                     {}};
    case Importance::Kind::Interactions:
      return PlotHit{QString("interactions: %1% of the tail loss's variance, from parameters varying together")
                         .arg(share),
                     {}};
    case Importance::Kind::Noise:
      break;
  }
  return PlotHit{QString("noise: %1% of the tail loss's variance, between repeats of one configuration").arg(share),
                 {}};
}

std::pair<std::string, std::string> default_heatmap_axes(const AnalysisData& data) {
  // The two swept parameters that the most trials both have, several values
  // each, numbers before words: in a sweep over hooks, the learning rate and
  // the hook rather than the hook and a compressor only BytePS trials have.
  std::pair<std::string, std::string> best;
  std::tuple<int, int, int> best_score{-1, -1, -1};
  for (std::size_t i = 0; i < data.axes.size(); ++i)
    for (std::size_t j = i + 1; j < data.axes.size(); ++j) {
      const auto &a = data.axes[i], &b = data.axes[j];
      int both = 0;
      std::set<QString> a_values, b_values;
      bool a_numeric = true, b_numeric = true;
      for (const auto& p : data.points) {
        const auto ia = p.axis_values.find(a), ib = p.axis_values.find(b);
        if (ia == p.axis_values.end() || ib == p.axis_values.end()) continue;
        ++both;
        a_values.insert(ia->second);
        b_values.insert(ib->second);
        a_numeric = a_numeric && finite_number(ia->second);
        b_numeric = b_numeric && finite_number(ib->second);
      }
      const std::tuple<int, int, int> score{both > 0 && a_values.size() > 1 && b_values.size() > 1, both,
                                            int(a_numeric) + int(b_numeric)};
      if (score > best_score) {
        best_score = score;
        // The parameter with more values across.
        best = a_values.size() >= b_values.size() ? std::pair{a, b} : std::pair{b, a};
      }
    }
  return best;
}

void AnalysisPage::draw_heatmap() {
  heatmap_->clearPlottables();
  heatmap_->clearItems();
  for (int i = heatmap_->plotLayout()->elementCount() - 1; i > 0; --i)
    if (qobject_cast<QCPColorScale*>(heatmap_->plotLayout()->elementAt(i))) heatmap_->plotLayout()->removeAt(i);
  heatmap_->plotLayout()->simplify();
  const auto xa = heat_x_->currentText().toStdString(), ya = heat_y_->currentText().toStdString();
  if (data_.axes.size() < 2 || xa == ya) {
    heatmap_->xAxis->setLabel(data_.axes.size() < 2 ? "a heatmap needs a sweep over two parameters"
                                                    : "pick two parameters");
    heatmap_->replot();
    return;
  }
  auto order = [](std::set<QString> values) {
    std::vector<QString> v(values.begin(), values.end());
    std::sort(v.begin(), v.end(), [](const QString& a, const QString& b) {
      const auto da = finite_number(a), db = finite_number(b);
      return da && db ? *da < *db : a < b;
    });
    return v;
  };
  std::set<QString> xs_set, ys_set;
  for (const auto& p : data_.points)
    if (p.axis_values.count(xa) && p.axis_values.count(ya)) {
      xs_set.insert(p.axis_values.at(xa));
      ys_set.insert(p.axis_values.at(ya));
    }
  const auto xs = order(xs_set), ys = order(ys_set);
  if (xs.empty() || ys.empty()) return heatmap_->replot();
  // Values drawn rather than gridded (random search, TPE) fill few cells of
  // their grid: a filled contour of the loss between the trials instead.
  std::size_t both = 0;
  bool numeric = true;
  for (const auto& p : data_.points)
    if (p.axis_values.count(xa) && p.axis_values.count(ya)) {
      ++both;
      numeric = numeric && finite_number(p.axis_values.at(xa)) && finite_number(p.axis_values.at(ya));
    }
  if (numeric && both >= 4 && xs.size() * ys.size() > 2 * both) return draw_contour(xa, ya);
  heat_contour_ = false;
  auto* map = new QCPColorMap(heatmap_->xAxis, heatmap_->yAxis);
  map->setObjectName("heatmap:cells");
  map->data()->setSize(static_cast<int>(xs.size()), static_cast<int>(ys.size()));
  // Cell k is centred on k: QCustomPlot spans n > 1 cells' centres, a single cell the whole range.
  const auto centres = [](std::size_t n) { return n > 1 ? QCPRange(0, double(n) - 1) : QCPRange(-0.5, 0.5); };
  map->data()->setRange(centres(xs.size()), centres(ys.size()));
  for (int i = 0; i < static_cast<int>(xs.size()); ++i)
    for (int j = 0; j < static_cast<int>(ys.size()); ++j) map->data()->setCell(i, j, NAN);  // no trial: blank
  // Trials that differ only in other swept parameters share a cell: it shows
  // the best of them (a diverged trial only when all of them diverged).
  struct Cell {
    double best = INFINITY;
    int trials = 0, finite = 0;
  };
  std::map<std::pair<int, int>, Cell> cells;
  heat_cells_.clear();
  std::set<std::int64_t> seen;
  int max_seeds = 1;
  for (const auto& p : data_.points) {
    if (!p.axis_values.count(xa) || !p.axis_values.count(ya)) continue;
    if (!seen.insert(p.configuration_run ? p.configuration_run : p.run_id).second) continue;  // a configuration once
    max_seeds = std::max(max_seeds, p.seeds);
    const int i = static_cast<int>(std::find(xs.begin(), xs.end(), p.axis_values.at(xa)) - xs.begin());
    const int j = static_cast<int>(std::find(ys.begin(), ys.end(), p.axis_values.at(ya)) - ys.begin());
    auto& cell = cells[{i, j}];
    ++cell.trials;
    auto& readout = heat_cells_[{i, j}];
    readout.runs.push_back(p.configuration_run ? p.configuration_run : p.run_id);
    readout.text += QString("%1run %2 %3: tail loss %4")
                        .arg(readout.text.isEmpty() ? QString("%1 = %2, %3 = %4\n")
                                                          .arg(QString::fromStdString(xa), p.axis_values.at(xa),
                                                               QString::fromStdString(ya), p.axis_values.at(ya))
                                                    : QString("\n"))
                        .arg(readout.runs.back())
                        .arg(p.label, std::isfinite(p.loss_mean) ? QString::number(p.loss_mean, 'g', 5) : "diverged");
    if (std::isfinite(p.loss_mean)) {
      ++cell.finite;
      cell.best = std::min(cell.best, p.loss_mean);
    }
  }
  // The colour scale spans the cells' values: text contrast follows it.
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [at, cell] : cells)
    if (cell.finite) {
      lo = std::min(lo, cell.best);
      hi = std::max(hi, cell.best);
    }
  if (!std::isfinite(lo)) lo = hi = 0;  // every trial diverged
  for (const auto& [at, cell] : cells) {
    const bool diverged = cell.finite == 0;  // takes the worst colour, and says so
    const double value = diverged ? hi : cell.best;
    map->data()->setCell(at.first, at.second, value);
    auto* label = new QCPItemText(heatmap_);
    label->position->setCoords(at.first, at.second);
    QString text = diverged ? QString("diverged") : QString::number(cell.best, 'g', 4);
    if (cell.trials > 1) text += QString("\nbest of %1").arg(cell.trials);
    label->setText(text);
    // Viridis runs from dark purple to yellow: dark text on the light end.
    label->setColor(hi > lo && (value - lo) / (hi - lo) > 0.55 ? Qt::black : Qt::white);
    label->setFont(QFont(font().family(), 8));
  }
  auto* scale = new QCPColorScale(heatmap_);
  heatmap_->plotLayout()->addElement(0, 1, scale);
  scale->axis()->setLabel(max_seeds > 1 ? "tail loss (mean over seeds; best in the cell)" : "tail loss (best in the cell)");
  map->setColorScale(scale);
  QCPColorGradient gradient = viridis_gradient();
  gradient.setNanHandling(QCPColorGradient::nhTransparent);
  map->setGradient(gradient);
  map->setInterpolate(false);
  map->rescaleDataRange(true);
  auto ticks = [](const std::vector<QString>& values) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const auto labels = short_value_labels(values);
    for (std::size_t k = 0; k < values.size(); ++k) ticker->addTick(static_cast<double>(k), labels[k]);
    return ticker;
  };
  heatmap_->xAxis->setTicker(ticks(xs));
  heatmap_->yAxis->setTicker(ticks(ys));
  heatmap_->xAxis->setLabel(QString::fromStdString(xa));
  heatmap_->yAxis->setLabel(QString::fromStdString(ya));
  heatmap_->xAxis->setRange(-0.5, xs.size() - 0.5);
  heatmap_->yAxis->setRange(-0.5, ys.size() - 0.5);
  heatmap_->replot();
}

void AnalysisPage::fill_what_if() {
  what_if_->setRowCount(0);
  for (const auto& row : data_.what_if) {
    const int r = what_if_->rowCount();
    what_if_->insertRow(r);
    what_if_->setItem(r, 0, new QTableWidgetItem(row.network));
    what_if_->setItem(r, 1, cell(row.baseline_ms, 1));
    what_if_->setItem(r, 2, new QTableWidgetItem(row.best));
    what_if_->setItem(r, 3, cell(row.best_ms, 1));
    QString speedup = "–";
    if (row.speedup) {
      speedup = QString::number(row.speedup->value, 'f', 2) + "×";
      if (row.speedup->has_interval())
        speedup += QString(" (%1–%2)").arg(row.speedup->low, 0, 'f', 2).arg(row.speedup->high, 0, 'f', 2);
    }
    what_if_->setItem(r, 4, new QTableWidgetItem(speedup));
    what_if_->setItem(r, 5, new QTableWidgetItem(row.verdict));
    what_if_->item(r, 5)->setToolTip(row.verdict);
  }
  what_if_->resizeColumnsToContents();
  // Every network's row in view, whatever the splitter above was left at.
  int height = what_if_->horizontalHeader()->sizeHint().height() + 2 * what_if_->frameWidth() +
               what_if_->horizontalScrollBar()->sizeHint().height();
  for (int r = 0; r < what_if_->rowCount(); ++r) height += what_if_->rowHeight(r);
  what_if_->setMinimumHeight(height);
}

}  // namespace commtune::ui

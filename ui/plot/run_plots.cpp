#include "ui/plot/run_plots.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QStackedLayout>
#include <QTableWidget>
#include <QVBoxLayout>
#include "ui/plot/qcustomplot.h"

namespace commtune::ui {

// Points drawn per curve at most: about twice a plot's width in pixels, so a
// min/max pair per pixel column keeps every spike while drawing stays cheap.
constexpr std::size_t kDrawnPoints = 2048;

struct RunPlots::Run {
  std::int64_t id = 0;
  QString label;
  std::size_t index = 0;  // colour
  // Per metric: against step, and (loss only) against wall time.
  std::vector<MinMaxSeries> by_step = std::vector<MinMaxSeries>(kMetrics, MinMaxSeries(kDrawnPoints));
  MinMaxSeries loss_by_wall{kDrawnPoints};
  std::vector<std::uint64_t> drawn_revision = std::vector<std::uint64_t>(kMetrics + 1, ~0ull);
  QCPGraph* loss = nullptr;
  QCPGraph* ratio = nullptr;
  QCPGraph* wire = nullptr;
  std::vector<QCPGraph*> breakdown;  // forward, backward, comm wait, hook: only for the chosen run
};

namespace {

QCustomPlot* make_plot(const QString& title, const QString& y_label, QWidget* parent) {
  auto* plot = new QCustomPlot(parent);
  plot->setObjectName("plot:" + title);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold)));
  plot->yAxis->setLabel(y_label);
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot->setMinimumSize(280, 180);
  plot->setNoAntialiasingOnDrag(true);
  return plot;
}

void set_graph_data(QCPGraph* graph, const MinMaxSeries& series) {
  const auto& xs = series.drawn_x();
  const auto& ys = series.drawn_y();
  QVector<QCPGraphData> data(static_cast<qsizetype>(xs.size()));
  for (std::size_t i = 0; i < xs.size(); ++i) data[static_cast<qsizetype>(i)] = QCPGraphData(xs[i], ys[i]);
  graph->data()->set(data, true);
}

}  // namespace

void style_plot(QCustomPlot* plot, const Theme& t) {
  plot->setBackground(t.background);
  for (auto* axis : {plot->xAxis, plot->yAxis}) {
    axis->setBasePen(QPen(t.muted));
    axis->setTickPen(QPen(t.muted));
    axis->setSubTickPen(QPen(t.muted));
    axis->setTickLabelColor(t.foreground);
    axis->setLabelColor(t.foreground);
    axis->grid()->setPen(QPen(t.grid, 0, Qt::DotLine));
  }
  if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))) title->setTextColor(t.foreground);
  plot->legend->setBrush(QBrush(t.background));
  plot->legend->setTextColor(t.foreground);
  plot->legend->setBorderPen(QPen(t.grid));
}

RunPlots::RunPlots(QWidget* parent) : QWidget(parent), theme_(current_theme()) {
  loss_plot_ = make_plot("Loss", "loss (mean over ranks)", this);
  ratio_plot_ = make_plot("Compression ratio", "fp32 bytes / wire bytes", this);
  wire_plot_ = make_plot("Bytes on the wire", "MB per step per rank", this);
  breakdown_plot_ = make_plot("Step time", "ms", this);
  loss_plot_->legend->setVisible(true);
  loss_plot_->legend->setFont(QFont(font().family(), 8));
  breakdown_plot_->legend->setVisible(true);
  breakdown_plot_->legend->setFont(QFont(font().family(), 8));

  x_axis_ = new QComboBox(this);
  x_axis_->setObjectName("plots:x_axis");
  x_axis_->addItems({"step", "wall time"});
  x_axis_->setToolTip("What the loss is drawn against");
  log_loss_ = new QCheckBox("log loss", this);
  breakdown_run_ = new QComboBox(this);
  breakdown_run_->setObjectName("plots:breakdown_run");
  breakdown_run_->setToolTip("The run whose step time is broken down (forward, backward, comm wait, hook)");
  connect(x_axis_, &QComboBox::currentIndexChanged, this, [this] {
    axis_changed_ = true;
    for (auto& r : runs_) r->drawn_revision[kLoss] = ~0ull;
    refresh();
  });
  connect(log_loss_, &QCheckBox::toggled, this, [this](bool on) {
    loss_plot_->yAxis->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    loss_plot_->yAxis->setTicker(on ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                                    : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    refresh();
  });
  connect(breakdown_run_, &QComboBox::currentIndexChanged, this, [this] { update_breakdown_choice(); });

  bucket_table_ = new QTableWidget(this);
  bucket_table_->setObjectName("plots:buckets");
  bucket_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  bucket_table_->verticalHeader()->setVisible(false);
  bucket_table_->setToolTip("The newest per-bucket statistics of the chosen run (rank 0)");

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel("Loss against", this));
  controls->addWidget(x_axis_);
  controls->addWidget(log_loss_);
  controls->addStretch();
  controls->addWidget(new QLabel("Breakdown of", this));
  controls->addWidget(breakdown_run_, 1);

  auto* grid = new QGridLayout;
  grid->addWidget(loss_plot_, 0, 0);
  grid->addWidget(breakdown_plot_, 0, 1);
  grid->addWidget(ratio_plot_, 1, 0);
  grid->addWidget(wire_plot_, 1, 1);
  auto* plots_box = new QWidget(this);
  plots_box->setLayout(grid);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->setObjectName("plots:splitter");
  splitter->addWidget(plots_box);
  splitter->addWidget(bucket_table_);
  splitter->setStretchFactor(0, 5);
  splitter->setStretchFactor(1, 1);

  empty_label_ = new QLabel(this);
  empty_label_->setAlignment(Qt::AlignCenter);
  empty_label_->setWordWrap(true);
  auto* content = new QWidget(this);
  auto* content_layout = new QVBoxLayout(content);
  content_layout->setContentsMargins(0, 0, 0, 0);
  content_layout->addLayout(controls);
  content_layout->addWidget(splitter, 1);
  auto* stack = new QStackedLayout(this);
  stack->addWidget(empty_label_);
  stack->addWidget(content);
  set_empty_text("No runs yet: start one from the Launch page (Ctrl+R).");
  set_x_axis_labels();
  apply_theme(theme_);
}

RunPlots::~RunPlots() = default;

void RunPlots::set_empty_text(const QString& text) { empty_label_->setText(text); }

std::vector<std::pair<QString, QCustomPlot*>> RunPlots::plots() const {
  return {{"loss", loss_plot_},
          {"step_time", breakdown_plot_},
          {"compression_ratio", ratio_plot_},
          {"wire_bytes", wire_plot_}};
}

void RunPlots::set_x_axis_labels() {
  loss_plot_->xAxis->setLabel(x_axis_->currentIndex() == 0 ? "step" : "wall time (s)");
  for (auto* p : {ratio_plot_, wire_plot_, breakdown_plot_}) p->xAxis->setLabel("step");
}

void RunPlots::add_run(std::int64_t run_id, const QString& label) {
  if (has_run(run_id)) return;
  auto run = std::make_unique<Run>();
  run->id = run_id;
  run->label = label;
  run->index = runs_.size();
  run->loss = loss_plot_->addGraph();
  run->ratio = ratio_plot_->addGraph();
  run->wire = wire_plot_->addGraph();
  run->loss->setName(label);
  restyle(*run);
  runs_.push_back(std::move(run));
  breakdown_run_->addItem(label, QVariant::fromValue<qlonglong>(run_id));
  static_cast<QStackedLayout*>(layout())->setCurrentIndex(1);
}

bool RunPlots::has_run(std::int64_t run_id) const {
  for (const auto& r : runs_)
    if (r->id == run_id) return true;
  return false;
}

std::size_t RunPlots::points(std::int64_t run_id) const {
  for (const auto& r : runs_)
    if (r->id == run_id) return r->by_step[kLoss].size();
  return 0;
}

void RunPlots::clear() {
  runs_.clear();
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_, breakdown_plot_}) {
    p->clearGraphs();
    p->replot();
  }
  breakdown_run_->clear();
  bucket_stats_.clear();
  bucket_table_->clear();
  bucket_table_->setRowCount(0);
  bucket_table_->setColumnCount(0);
  static_cast<QStackedLayout*>(layout())->setCurrentIndex(0);
}

void RunPlots::append(const LivePoint& p) {
  for (auto& r : runs_) {
    if (r->id != p.run_id) continue;
    const double x = static_cast<double>(p.step);
    auto& s = r->by_step;
    if (!s[kLoss].x().empty() && x <= s[kLoss].x().back()) return;  // a resumed run repeats no step
    s[kLoss].append(x, p.loss);
    s[kRatio].append(x, p.compression_ratio());
    s[kWire].append(x, p.wire_bytes / 1e6);
    s[kForward].append(x, p.forward_s * 1e3);
    s[kBackward].append(x, p.backward_s * 1e3);
    s[kCommWait].append(x, p.comm_wait_s * 1e3);
    s[kHook].append(x, p.hook_s * 1e3);
    const double wall = std::max(p.wall_s, r->loss_by_wall.size() ? r->loss_by_wall.x().back() : 0.0);
    r->loss_by_wall.append(wall, p.loss);
    return;
  }
}

void RunPlots::set_bucket_stats(const BucketStats& stats) {
  bucket_stats_[stats.run_id] = stats;
  bucket_stats_changed_ = true;
}

void RunPlots::update_breakdown_choice() {
  for (auto& r : runs_) {
    for (auto* g : r->breakdown) breakdown_plot_->removeGraph(g);
    r->breakdown.clear();
  }
  const auto chosen = breakdown_run_->currentData().toLongLong();
  static const char* names[] = {"forward", "backward", "comm wait", "hook"};
  for (auto& r : runs_) {
    if (r->id != chosen) continue;
    for (int m = kForward; m <= kHook; ++m) {
      auto* g = breakdown_plot_->addGraph();
      g->setName(names[m - kForward]);
      g->setPen(QPen(theme_.series_color(static_cast<std::size_t>(m - kForward)), 1));
      r->breakdown.push_back(g);
      r->drawn_revision[static_cast<std::size_t>(m)] = ~0ull;
    }
  }
  bucket_stats_changed_ = true;
  refresh();
}

void RunPlots::restyle(Run& run) {
  const QPen pen(theme_.series_color(run.index), 1);
  for (auto* g : {run.loss, run.ratio, run.wire}) g->setPen(pen);
  for (std::size_t m = 0; m < run.breakdown.size(); ++m) run.breakdown[m]->setPen(QPen(theme_.series_color(m), 1));
}

void RunPlots::apply_theme(const Theme& theme) {
  theme_ = theme;
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_, breakdown_plot_}) style_plot(p, theme_);
  for (auto& r : runs_) restyle(*r);
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_, breakdown_plot_}) p->replot();
}

void RunPlots::refresh(bool immediate) {
  if (axis_changed_) {
    set_x_axis_labels();
    axis_changed_ = false;
  }
  const bool by_wall = x_axis_->currentIndex() == 1;
  std::vector<QCustomPlot*> changed;
  auto mark = [&](QCustomPlot* p) {
    if (std::find(changed.begin(), changed.end(), p) == changed.end()) changed.push_back(p);
  };
  for (auto& r : runs_) {
    auto sync = [&](std::size_t slot, QCPGraph* graph, const MinMaxSeries& series) {
      if (r->drawn_revision[slot] == series.revision()) return;
      set_graph_data(graph, series);
      r->drawn_revision[slot] = series.revision();
      mark(graph->parentPlot());
    };
    sync(kLoss, r->loss, by_wall ? r->loss_by_wall : r->by_step[kLoss]);
    sync(kRatio, r->ratio, r->by_step[kRatio]);
    sync(kWire, r->wire, r->by_step[kWire]);
    for (std::size_t m = 0; m < r->breakdown.size(); ++m) sync(kForward + m, r->breakdown[m], r->by_step[kForward + m]);
  }
  if (bucket_stats_changed_) {
    bucket_stats_changed_ = false;
    const auto it = bucket_stats_.find(breakdown_run_->currentData().toLongLong());
    bucket_table_->clear();
    bucket_table_->setRowCount(0);
    bucket_table_->setColumnCount(0);
    if (it != bucket_stats_.end()) {
      QStringList columns{"bucket"};
      for (const auto& [bucket, values] : it->second.values)
        for (const auto& [name, value] : values)
          if (!columns.contains(QString::fromStdString(name))) columns << QString::fromStdString(name);
      bucket_table_->setColumnCount(static_cast<int>(columns.size()));
      bucket_table_->setHorizontalHeaderLabels(columns);
      bucket_table_->setRowCount(static_cast<int>(it->second.values.size()));
      int row = 0;
      for (const auto& [bucket, values] : it->second.values) {
        bucket_table_->setItem(row, 0, new QTableWidgetItem(QString::number(bucket)));
        for (const auto& [name, value] : values)
          bucket_table_->setItem(row, static_cast<int>(columns.indexOf(QString::fromStdString(name))),
                                 new QTableWidgetItem(QString::number(value, 'g', 5)));
        ++row;
      }
      bucket_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    }
  }
  for (auto* p : changed) {
    p->rescaleAxes();
    p->replot(immediate ? QCustomPlot::rpImmediateRefresh : QCustomPlot::rpQueuedReplot);
  }
}

int RunPlots::bucket_rows() const { return bucket_table_->rowCount(); }

QString RunPlots::csv() const {
  QString out = "run,label,step,loss,compression_ratio,wire_mb,forward_ms,backward_ms,comm_wait_ms,hook_ms\n";
  for (const auto& r : runs_) {
    const auto& s = r->by_step;
    QString label = r->label;
    label.replace('"', "\"\"");
    for (std::size_t i = 0; i < s[kLoss].size(); ++i) {
      out += QString("%1,\"%2\",%3").arg(r->id).arg(label).arg(static_cast<qlonglong>(s[kLoss].x()[i]));
      for (int m = kLoss; m < kMetrics; ++m)
        out += "," + QString::number(s[static_cast<std::size_t>(m)].y()[i], 'g', 9);
      out += "\n";
    }
  }
  return out;
}

}  // namespace commtune::ui

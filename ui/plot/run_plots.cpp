#include "ui/plot/run_plots.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QMenu>
#include <QPainter>
#include <QSlider>
#include <QSplitter>
#include <QStackedLayout>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cstdint>
#include <optional>

#include "ui/forms/param_field.h"
#include "ui/plot/qcustomplot.h"

namespace commtune::ui {

// Points drawn per curve at most: about a plot's width in pixels, so a
// min/max pair per two pixel columns keeps every spike while drawing 90
// curves (30 trials x 3 plots) stays within a frame (bench/plot_bench).
// Palette entries of the breakdown's forward, backward, comm wait and hook:
// four hues far apart (not orange beside yellow).
constexpr std::size_t kBreakdownColours[] = {0, 1, 2, 5};

struct RunPlots::Run {
  std::int64_t id = 0;
  QString label;
  std::size_t index = 0;  // colour
  bool visible = true;
  QString other_text;  // the label's words that are not parameter=value
  QTreeWidgetItem* item = nullptr;  // its row in the trial list
  std::vector<LivePoint> raw;  // as received: smoothing and truncation redraw from it
  // Per metric, as drawn (the loss and the step times smoothed): against
  // step, and (loss only) against wall time; the raw loss, drawn faint under
  // the smoothed one while smoothing is on.
  std::vector<MinMaxSeries> by_step = std::vector<MinMaxSeries>(kMetrics, MinMaxSeries(kDrawnPoints));
  MinMaxSeries loss_by_wall{kDrawnPoints};
  // The faint raw curve at a quarter of the resolution: its min/max pairs show the noise's envelope,
  // and 30 of them stay within the frame budget (bench/plot_bench, smoothed).
  MinMaxSeries raw_loss_by_step{kDrawnPoints / 4}, raw_loss_by_wall{kDrawnPoints / 4};
  double wall_offset = 0;  // a resumed launch's clock restarts: its points go on after the last one
  std::vector<double> ema = std::vector<double>(kMetrics, 0.0);
  std::vector<int> ema_count = std::vector<int>(kMetrics, 0);
  std::vector<std::uint64_t> drawn_revision = std::vector<std::uint64_t>(kMetrics + 1, ~0ull);
  QCPGraph* raw_loss = nullptr;
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

double metric_value(const LivePoint& p, int metric) { return live_metric(p, static_cast<LiveMetric>(metric)); }

// TensorBoard's smoothing: an exponential moving average divided by
// 1 - weight^n, so the first points are not pulled towards 0. Non-finite
// values pass through (a diverged step stays visible) without entering it.
double smooth(double& ema, int& count, double value, double weight) {
  if (weight <= 0 || !std::isfinite(value)) return value;
  ema = ema * weight + (1 - weight) * value;
  ++count;
  return ema / (1 - std::pow(weight, count));
}

constexpr int kRunRole = Qt::UserRole;

// Sorts numbers as numbers (rank 16 after rank 2).
class TrialItem final : public QTreeWidgetItem {
 public:
  using QTreeWidgetItem::QTreeWidgetItem;
  bool operator<(const QTreeWidgetItem& other) const override {
    const int c = treeWidget() ? treeWidget()->sortColumn() : 0;
    const auto a = data(c, Qt::UserRole + 1), b = other.data(c, Qt::UserRole + 1);
    if (a.typeId() == QMetaType::Double && b.typeId() == QMetaType::Double) return a.toDouble() < b.toDouble();
    return text(c) < other.text(c);
  }
};

QIcon swatch(const QColor& colour) {
  QPixmap pixmap(14, 14);
  pixmap.fill(Qt::transparent);
  QPainter painter(&pixmap);
  painter.fillRect(QRect(1, 5, 12, 4), colour);
  return QIcon(pixmap);
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
    axis->grid()->setZeroLinePen(Qt::NoPen);
  }
  if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))) title->setTextColor(t.foreground);
  plot->legend->setBrush(QBrush(t.background));
  plot->legend->setTextColor(t.foreground);
  plot->legend->setBorderPen(QPen(t.grid));
}

QCPColorGradient viridis_gradient() {
  QCPColorGradient gradient;
  gradient.setColorStops({{0.0, QColor(0x44, 0x01, 0x54)},
                          {0.25, QColor(0x3b, 0x52, 0x8b)},
                          {0.5, QColor(0x21, 0x91, 0x8c)},
                          {0.75, QColor(0x5e, 0xc9, 0x62)},
                          {1.0, QColor(0xfd, 0xe7, 0x25)}});
  gradient.setColorInterpolation(QCPColorGradient::ciRGB);
  return gradient;
}

void set_log_axis(QCPAxis* axis, bool log) {
  axis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  axis->setTicker(log ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                      : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
}

namespace {

// The value range of the visible data on the axis's plot; nullopt when it shows none.
std::optional<QCPRange> data_value_range(QCPAxis* axis) {
  const auto domain = axis->scaleType() == QCPAxis::stLogarithmic ? QCP::sdPositive : QCP::sdBoth;
  std::optional<QCPRange> out;
  for (auto* plottable : axis->plottables()) {
    if (!plottable->realVisibility()) continue;
    bool found = false;
    const auto r = plottable->getValueRange(found, domain);
    if (found) out = out ? QCPRange(std::min(out->lower, r.lower), std::max(out->upper, r.upper)) : r;
  }
  return out;
}

}  // namespace

// After rescaleAxes: QCustomPlot centres a constant series in the axis's
// previous span (-0.5 .. 4.5 on a new plot, or whatever other runs left), so
// the data's own range says whether it is flat.
void widen_flat_range(QCPAxis* axis) {
  const auto data = data_value_range(axis);
  if (!data) return;
  const auto range = *data;
  if (axis->scaleType() == QCPAxis::stLogarithmic) {
    // Within a decade, labels at powers of ten would need a decade of empty
    // space around the data: plain ticks (1.2, 1.4, ...) on the log scale instead.
    const bool within_decade = range.lower > 0 && range.upper / range.lower < 10;
    const bool log_ticks = !axis->ticker().dynamicCast<QCPAxisTickerLog>().isNull();
    if (within_decade && log_ticks) axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    if (!within_decade && !log_ticks) axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog));
    if (range.lower > 0 && range.upper / range.lower < 1.02) {  // flat: +-5% around it
      const double centre = std::sqrt(range.lower * range.upper);
      axis->setRange(centre / 1.05, centre * 1.05);
    }
    return;
  }
  // A constant (a compression ratio, bytes per step) gets +-5% around it:
  // round labels (1.9, 2, 2.1) rather than 1.999 .. 2.0005. A series that
  // varies a little gets at least 0.1% of its size (or 1e-9 around 0): ticks
  // 1e-4 apart in relative terms, which six significant digits tell apart.
  const double centre = range.center();
  if (range.size() <= 1e-12 * std::abs(centre) || range.size() == 0) {
    const double half = centre == 0 ? 0.5 : std::abs(centre) * 0.05;
    axis->setRange(centre - half, centre + half);
    return;
  }
  const double least = std::max(1e-9, std::abs(centre) * 1e-3);
  if (range.size() < least) axis->setRange(centre - least / 2, centre + least / 2);
}

RunPlots::RunPlots(QWidget* parent) : QWidget(parent), theme_(current_theme()) {
  loss_plot_ = make_plot("Loss", "loss (mean over ranks)", this);
  ratio_plot_ = make_plot("Compression ratio", "fp32 bytes / wire bytes", this);
  wire_plot_ = make_plot("Bytes on the wire", "MB per step per rank", this);
  breakdown_plot_ = make_plot("Step time", "ms", this);
  loss_plot_->addLayer("raw", loss_plot_->layer("main"), QCustomPlot::limBelow);
  for (auto* plot : {loss_plot_, ratio_plot_, wire_plot_, breakdown_plot_}) {
    auto* readout = new PlotReadout(plot, [this, plot](const QPointF& at) { return curve_hit(plot, at); });
    readouts_.push_back(readout);
    connect(readout, &PlotReadout::clicked, this, [this](const std::vector<std::int64_t>& runs) {
      Q_EMIT run_clicked(runs.front());
    });
  }
  breakdown_plot_->legend->setVisible(true);
  breakdown_plot_->legend->setFont(QFont(font().family(), 8));

  x_axis_ = new QComboBox(this);
  x_axis_->setObjectName("plots:x_axis");
  x_axis_->addItems({"step", "relative time"});
  x_axis_->setToolTip("What the loss is drawn against: the step, or the seconds since each run started (its "
                      "launches one after another), so that runs started at different times line up");
  smoothing_slider_ = new QSlider(Qt::Horizontal, this);
  smoothing_slider_->setObjectName("plots:smoothing");
  smoothing_slider_->setRange(0, 99);
  smoothing_slider_->setMaximumWidth(140);
  smoothing_slider_->setToolTip("Exponential moving average of every curve, as TensorBoard smooths (0: raw points)");
  smoothing_label_ = new QLabel("0.00", this);
  connect(smoothing_slider_, &QSlider::valueChanged, this, [this](int v) { set_smoothing(v / 100.0); });
  const char* log_names[] = {"loss", "time", "ratio", "bytes"};
  for (int i = 0; i < 4; ++i) {
    auto* box = new QCheckBox(log_names[i], this);
    box->setObjectName(QString("plots:log:") + log_names[i]);
    box->setToolTip(QString("Log scale on the %1 plot's y axis").arg(log_names[i]));
    connect(box, &QCheckBox::toggled, this, [this, i](bool on) { set_log_y(static_cast<Plot>(i), on); });
    log_y_.push_back(box);
  }

  run_list_ = new QTreeWidget(this);
  run_list_->setObjectName("plots:runs");
  run_list_->setMouseTracking(true);
  run_list_->setMinimumWidth(150);
  run_list_->setRootIsDecorated(false);
  run_list_->setUniformRowHeights(true);
  run_list_->setSortingEnabled(true);
  run_list_->sortByColumn(0, Qt::AscendingOrder);
  run_list_->setHeaderLabels({"run"});
  run_list_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  run_list_->setContextMenuPolicy(Qt::CustomContextMenu);
  run_list_->installEventFilter(this);
  run_list_->setToolTip("Check to show a run, double-click to show it alone (again: all), hover to pick it out");
  connect(run_list_, &QTreeWidget::itemChanged, this, [this](QTreeWidgetItem* item) {
    for (auto& r : runs_)
      if (r->item == item && r->visible != (item->checkState(0) == Qt::Checked)) {
        r->visible = item->checkState(0) == Qt::Checked;
        soloed_ = -1;
        visibility_changed();
      }
  });
  connect(run_list_, &QTreeWidget::itemDoubleClicked, this,
          [this](QTreeWidgetItem* item) { solo(item->data(0, kRunRole).toLongLong()); });
  connect(run_list_, &QTreeWidget::itemEntered, this,
          [this](QTreeWidgetItem* item) { highlight(item->data(0, kRunRole).toLongLong()); });
  connect(run_list_, &QTreeWidget::viewportEntered, this, [this] { highlight(-1); });
  connect(run_list_, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QMenu menu(this);
    if (auto* item = run_list_->itemAt(at)) {
      const auto id = item->data(0, kRunRole).toLongLong();
      menu.addAction("Show only this run", this, [this, id] { solo(id); });
    }
    menu.addAction("Show all runs", this, [this] { show_all(); });
    menu.addAction("Hide all runs", this, [this] {
      for (auto& r : runs_) r->visible = false;
      soloed_ = -1;
      visibility_changed();
    });
    menu.exec(run_list_->viewport()->mapToGlobal(at));
  });
  breakdown_run_ = new QComboBox(this);
  breakdown_run_->setObjectName("plots:breakdown_run");
  breakdown_run_->setToolTip("The run whose step time is broken down (forward, backward, comm wait, hook)");
  connect(x_axis_, &QComboBox::currentIndexChanged, this, [this] {
    axis_changed_ = true;
    for (auto& r : runs_) r->drawn_revision[kLoss] = r->drawn_revision[kMetrics] = ~0ull;
    refresh();
  });
  connect(breakdown_run_, &QComboBox::currentIndexChanged, this, [this] { update_breakdown_choice(); });

  bucket_table_ = new QTableWidget(this);
  bucket_table_->setObjectName("plots:buckets");
  bucket_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  bucket_table_->verticalHeader()->setVisible(false);
  bucket_table_->setToolTip("The newest per-bucket statistics of the chosen run (rank 0)");

  group_seeds_ = new QCheckBox("Group seeds", this);
  group_seeds_->setObjectName("plots:group_seeds");
  group_seeds_->setToolTip("Runs that differ only in their seed (labels ending seed=N) as one curve: their mean "
                           "loss, with a band of one standard deviation either side");
  connect(group_seeds_, &QCheckBox::toggled, this, [this] { regroup(); });

  auto* controls = new QHBoxLayout;
  controls->addWidget(group_seeds_);
  controls->addSpacing(12);
  controls->addWidget(new QLabel("Loss against", this));
  controls->addWidget(x_axis_);
  controls->addSpacing(12);
  controls->addWidget(new QLabel("Smoothing", this));
  controls->addWidget(smoothing_slider_);
  controls->addWidget(smoothing_label_);
  controls->addSpacing(12);
  controls->addWidget(new QLabel("Log y:", this));
  for (auto* box : log_y_) controls->addWidget(box);
  controls->addStretch();
  controls->addWidget(new QLabel("Breakdown of", this));
  controls->addWidget(breakdown_run_, 1);

  auto* grid = new QGridLayout;
  grid->addWidget(loss_plot_, 0, 0);
  grid->addWidget(breakdown_plot_, 0, 1);
  grid->addWidget(ratio_plot_, 1, 0);
  grid->addWidget(wire_plot_, 1, 1);
  auto* plots_box = new QSplitter(Qt::Horizontal, this);
  plots_box->setObjectName("plots:legend_splitter");
  auto* grid_box = new QWidget(this);
  grid_box->setLayout(grid);
  plots_box->addWidget(run_list_);
  plots_box->addWidget(grid_box);
  plots_box->setStretchFactor(0, 1);
  plots_box->setStretchFactor(1, 6);
  plots_box->setSizes({260, 1000});
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
  // Compression sends orders of magnitude less than allreduce: bytes start on a log axis.
  set_log_y(Plot::Wire, true);
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
  loss_plot_->xAxis->setLabel(x_axis_->currentIndex() == 0 ? "step" : "time since the run started (s)");
  for (auto* p : {ratio_plot_, wire_plot_, breakdown_plot_}) p->xAxis->setLabel("step");
}

void RunPlots::add_run(std::int64_t run_id, const QString& label,
                       const std::vector<std::pair<QString, QString>>& values) {
  if (has_run(run_id)) return;
  auto run = std::make_unique<Run>();
  run->id = run_id;
  run->label = label;
  run->index = runs_.size();
  run->loss = loss_plot_->addGraph();
  run->raw_loss = loss_plot_->addGraph();
  run->raw_loss->setLayer("raw");  // under every smoothed curve
  run->raw_loss->setVisible(smoothing_ > 0);
  run->raw_loss->removeFromLegend();
  run->ratio = ratio_plot_->addGraph();
  run->wire = wire_plot_->addGraph();
  run->loss->setName(label);
  {
    QSignalBlocker block(run_list_);
    run->item = new TrialItem(run_list_);
    run->item->setData(0, kRunRole, QVariant::fromValue<qlonglong>(run_id));
    run->item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable);
    run->item->setCheckState(0, Qt::Checked);
    run->item->setText(0, QString::number(run_id));
    run->item->setData(0, Qt::UserRole + 1, static_cast<double>(run_id));
    // "2 matrix_approximation_rank=1 lr=0.05": a column per parameter, the
    // rest as the trial's text; the values given, when there are (a renamed
    // run's label has none), instead of the label's.
    QStringList other;
    std::vector<std::pair<QString, QString>> columns = values;
    for (const auto& word : label.split(' ', Qt::SkipEmptyParts)) {
      const auto eq = word.indexOf('=');
      if (word == QString::number(run_id)) continue;
      if (eq <= 0)
        other << word;
      else if (values.empty())
        columns.emplace_back(word.left(eq), word.mid(eq + 1));
    }
    for (const auto& [key, value] : columns) {
      int column = legend_keys_.indexOf(key);
      if (column < 0) {
        legend_keys_ << key;
        column = static_cast<int>(legend_keys_.size()) - 1;
        update_legend_header();
      }
      run->item->setText(column + 1, value);
      run->item->setData(column + 1, Qt::UserRole + 1, sort_key(value));
    }
    run->other_text = other.join(' ');
    bool has_values = false;
    for (int c = 1; c <= static_cast<int>(legend_keys_.size()); ++c) has_values = has_values || !run->item->text(c).isEmpty();
    if (has_values) {
      run->item->setText(static_cast<int>(legend_keys_.size()) + 1, run->other_text);
    } else {  // the allreduce baseline: its label across the row
      run->item->setText(0, QString("%1 %2").arg(run_id).arg(run->other_text));
      run->item->setFirstColumnSpanned(true);
    }
    for (int c = 0; c < run_list_->columnCount(); ++c) run->item->setToolTip(c, label);
  }
  restyle(*run);
  runs_.push_back(std::move(run));
  breakdown_run_->addItem(label, QVariant::fromValue<qlonglong>(run_id));
  static_cast<QStackedLayout*>(layout())->setCurrentIndex(1);
  if (group_seeds_->isChecked()) regroup();  // a new replica joins its group
}

bool RunPlots::has_run(std::int64_t run_id) const {
  for (const auto& r : runs_)
    if (r->id == run_id) return true;
  return false;
}

RunPlots::Run* RunPlots::find(std::int64_t run_id) const {
  for (const auto& r : runs_)
    if (r->id == run_id) return r.get();
  return nullptr;
}

std::optional<PlotHit> RunPlots::curve_hit(QCustomPlot* plot, const QPointF& pixel) const {
  const auto near = nearest_point(plot, pixel);
  if (!near) return std::nullopt;
  static const char* parts[] = {"forward", "backward", "comm wait", "hook"};
  for (const auto& r : runs_) {
    const auto part = std::find(r->breakdown.begin(), r->breakdown.end(), near->graph);
    if (part != r->breakdown.end())
      return PlotHit{QString("%1: step %2, %3 %4 ms")
                         .arg(r->label)
                         .arg(near->key, 0, 'f', 0)
                         .arg(parts[part - r->breakdown.begin()])
                         .arg(near->value, 0, 'g', 4),
                     {r->id}};
    if (near->graph != r->loss && near->graph != r->raw_loss && near->graph != r->ratio && near->graph != r->wire)
      continue;
    const bool by_wall = plot == loss_plot_ && x_axis_->currentIndex() == 1;
    const QString at = by_wall ? QString("%1 s").arg(near->key, 0, 'f', 1) : QString("step %1").arg(near->key, 0, 'f', 0);
    const QString what = near->graph == r->ratio  ? QString("compression ratio %1").arg(near->value, 0, 'g', 4)
                         : near->graph == r->wire ? QString("%1 MB on the wire").arg(near->value, 0, 'g', 4)
                         : near->graph == r->loss && smoothing_ > 0
                             ? QString("loss %1 (smoothed)").arg(near->value, 0, 'g', 5)
                             : QString("loss %1").arg(near->value, 0, 'g', 5);
    return PlotHit{QString("%1: %2, %3").arg(r->label, at, what), {r->id}};
  }
  return std::nullopt;
}

PlotReadout* RunPlots::readout(Plot which) const {
  switch (which) {
    case Plot::Loss:
      return readouts_[0];
    case Plot::Ratio:
      return readouts_[1];
    case Plot::Wire:
      return readouts_[2];
    case Plot::StepTime:
      break;
  }
  return readouts_[3];
}

QCPGraph* RunPlots::loss_graph(std::int64_t run_id) const {
  const auto* run = find(run_id);
  return run ? run->loss : nullptr;
}

QCPGraph* RunPlots::raw_loss_graph(std::int64_t run_id) const {
  const auto* run = find(run_id);
  return run ? run->raw_loss : nullptr;
}

std::size_t RunPlots::points(std::int64_t run_id) const {
  const auto* run = find(run_id);
  return run ? run->raw.size() : 0;
}

std::vector<LivePoint> RunPlots::points_of(std::int64_t run_id) const {
  const auto* run = find(run_id);
  return run ? run->raw : std::vector<LivePoint>{};
}

QCustomPlot* RunPlots::plot(Plot which) const {
  switch (which) {
    case Plot::Loss:
      return loss_plot_;
    case Plot::StepTime:
      return breakdown_plot_;
    case Plot::Ratio:
      return ratio_plot_;
    case Plot::Wire:
      break;
  }
  return wire_plot_;
}

void RunPlots::set_log_y(Plot which, bool on) {
  auto* box = log_y_[static_cast<std::size_t>(which)];
  if (box->isChecked() != on) return box->setChecked(on);  // comes back here through its signal
  set_log_axis(plot(which)->yAxis, on);
  for (auto& r : runs_) std::fill(r->drawn_revision.begin(), r->drawn_revision.end(), ~0ull);
  refresh();
}

void RunPlots::set_run_visible(std::int64_t run_id, bool visible) {
  if (auto* run = find(run_id)) run->item->setCheckState(0, visible ? Qt::Checked : Qt::Unchecked);
}

bool RunPlots::run_visible(std::int64_t run_id) const {
  const auto* run = find(run_id);
  return run && run->visible;
}

void RunPlots::solo(std::int64_t run_id) {
  if (soloed_ == run_id) return show_all();
  for (auto& r : runs_) r->visible = r->id == run_id;
  soloed_ = run_id;
  visibility_changed();
}

void RunPlots::show_all() {
  for (auto& r : runs_) r->visible = true;
  soloed_ = -1;
  visibility_changed();
}

void RunPlots::highlight(std::int64_t run_id) {
  if (highlighted_ == run_id) return;
  highlighted_ = run_id;
  for (auto& r : runs_) restyle(*r);
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_}) p->replot(QCustomPlot::rpQueuedReplot);
}

bool RunPlots::eventFilter(QObject* watched, QEvent* event) {
  if (watched == run_list_ && event->type() == QEvent::Leave) highlight(-1);
  return QWidget::eventFilter(watched, event);
}

void RunPlots::update_legend_header() {
  QStringList headers{"run"};
  for (const auto& key : legend_keys_) headers << short_param_name(key);
  headers << "trial";
  const int old_columns = run_list_->columnCount();
  run_list_->setColumnCount(static_cast<int>(headers.size()));
  run_list_->setHeaderLabels(headers);
  for (int c = 1; c <= static_cast<int>(legend_keys_.size()); ++c)
    run_list_->headerItem()->setToolTip(c, legend_keys_[c - 1]);
  // The free text moves right when a parameter column is added before it.
  if (old_columns != run_list_->columnCount())
    for (auto& r : runs_)
      if (r->item) {
        r->item->setText(old_columns - 1, {});
        r->item->setText(run_list_->columnCount() - 1, r->other_text);
      }
}

void RunPlots::visibility_changed() {
  QSignalBlocker block(run_list_);
  for (auto& r : runs_) {
    r->item->setCheckState(0, r->visible ? Qt::Checked : Qt::Unchecked);
    const bool grouped = std::any_of(groups_.begin(), groups_.end(), [&](const Drawn& g) {
      return std::count(g.group.runs.begin(), g.group.runs.end(), r->id) > 0;
    });
    for (auto* g : {r->ratio, r->wire}) g->setVisible(r->visible);
    r->loss->setVisible(r->visible && !grouped);  // its group's mean and band stand for it
    r->raw_loss->setVisible(r->visible && !grouped && smoothing_ > 0);
  }
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_}) {
    p->rescaleAxes(true);
    widen_flat_range(p->yAxis);
    p->replot(QCustomPlot::rpQueuedReplot);
  }
}

void RunPlots::set_smoothing(double weight) {
  weight = std::clamp(weight, 0.0, 0.99);
  if (weight == smoothing_) return;
  smoothing_ = weight;
  {
    QSignalBlocker block(smoothing_slider_);
    smoothing_slider_->setValue(static_cast<int>(std::lround(weight * 100)));
  }
  smoothing_label_->setText(QString::number(weight, 'f', 2));
  for (auto& r : runs_) redraw_from_raw(*r);
  visibility_changed();
  refresh();
}

void RunPlots::redraw_from_raw(Run& run) {
  run.by_step.assign(kMetrics, MinMaxSeries(kDrawnPoints));
  run.loss_by_wall = MinMaxSeries(kDrawnPoints);
  run.raw_loss_by_step = MinMaxSeries(kDrawnPoints / 4);
  run.raw_loss_by_wall = MinMaxSeries(kDrawnPoints / 4);
  run.wall_offset = 0;  // the stored points carry it already
  std::fill(run.ema.begin(), run.ema.end(), 0.0);
  std::fill(run.ema_count.begin(), run.ema_count.end(), 0);
  std::fill(run.drawn_revision.begin(), run.drawn_revision.end(), ~0ull);  // new series restart their revisions
  auto raw = std::move(run.raw);
  run.raw.clear();
  for (const auto& p : raw) append(p);
  for (auto& g : groups_)  // its group's aggregate is redrawn from the first step at the next refresh
    if (std::count(g.group.runs.begin(), g.group.runs.end(), run.id)) g = Drawn{std::move(g.group), g.mean, g.upper, g.lower};
}

void RunPlots::merge(std::int64_t run_id, const std::vector<LivePoint>& points) {
  auto* run = find(run_id);
  if (!run || points.empty()) return;
  auto by_step = [](const LivePoint& a, const LivePoint& b) { return a.step < b.step; };
  std::vector<LivePoint> all = run->raw;  // first: a step shown already keeps its point
  all.insert(all.end(), points.begin(), points.end());
  std::stable_sort(all.begin(), all.end(), by_step);
  all.erase(std::unique(all.begin(), all.end(), [](const LivePoint& a, const LivePoint& b) { return a.step == b.step; }),
            all.end());
  run->raw = std::move(all);
  redraw_from_raw(*run);
}

void RunPlots::truncate(std::int64_t run_id, std::int64_t step) {
  auto* run = find(run_id);
  if (!run || run->raw.empty() || run->raw.back().step < step) return;
  run->raw.erase(std::lower_bound(run->raw.begin(), run->raw.end(), step,
                                  [](const LivePoint& p, std::int64_t s) { return p.step < s; }),
                 run->raw.end());
  redraw_from_raw(*run);
}

std::vector<RunPlots::SeedGroup> RunPlots::seed_groups() const {
  // The label without its id and its seed=N word: runs that share it are replicas.
  std::map<QString, std::vector<std::int64_t>> by_key;
  for (const auto& r : runs_) {
    QStringList words = r->label.split(' ', Qt::SkipEmptyParts);
    const auto seed = std::find_if(words.begin(), words.end(), [](const QString& w) { return w.startsWith("seed="); });
    if (seed == words.end()) continue;
    words.erase(seed);
    words.removeAll(QString::number(r->id));
    by_key[words.join(' ')].push_back(r->id);
  }
  std::vector<SeedGroup> out;
  for (auto& [key, ids] : by_key)
    if (ids.size() >= 2) out.push_back({key, std::move(ids)});
  return out;
}

void RunPlots::regroup() {
  for (auto& g : groups_)
    for (auto* graph : {g.mean, g.upper, g.lower}) loss_plot_->removeGraph(graph);
  groups_.clear();
  if (group_seeds_->isChecked()) {
    for (auto& group : seed_groups()) {
      Drawn d{std::move(group), loss_plot_->addGraph(), loss_plot_->addGraph(), loss_plot_->addGraph()};
      d.upper->setChannelFillGraph(d.lower);
      d.mean->setName(d.group.key);
      groups_.push_back(std::move(d));
    }
  }
  restyle_groups();
  draw_groups();
  visibility_changed();
}

void RunPlots::restyle_groups() {
  for (auto& g : groups_) {
    const auto* first = find(g.group.runs.front());
    QColor colour = theme_.series_color(first ? first->index : 0);
    g.mean->setPen(QPen(colour, 1));  // 1 px: wider antialiased lines take Qt's slow raster path
    QColor band = colour;
    band.setAlpha(50);
    for (auto* edge : {g.upper, g.lower}) edge->setPen(Qt::NoPen);
    g.upper->setBrush(band);
    // Antialiased, ten translucent bands took the loss plot's redraw to 20 ms (bench/plot_bench, grouped).
    g.upper->setAntialiasedFill(false);
  }
}

void RunPlots::draw_groups() {
  // Mean and standard deviation over the replicas at each step they all reached, smoothed as the curves are.
  const bool by_wall = x_axis_->currentIndex() == 1;
  for (auto& g : groups_) {
    std::vector<const Run*> members;
    for (const auto id : g.group.runs)
      if (const auto* r = find(id)) members.push_back(r);
    std::size_t steps = members.empty() ? 0 : SIZE_MAX;
    for (const auto* r : members) steps = std::min(steps, r->raw.size());
    if (g.by_wall != by_wall || g.smoothing != smoothing_ || steps < g.steps) {
      g = Drawn{std::move(g.group), g.mean, g.upper, g.lower};
      g.by_wall = by_wall;
      g.smoothing = smoothing_;
    }
    if (steps == g.steps && g.steps > 0) continue;
    for (std::size_t i = g.steps; i < steps; ++i) {
      double sum = 0, sum_sq = 0, wall = 0;
      for (const auto* r : members) {
        sum += r->raw[i].loss;
        sum_sq += r->raw[i].loss * r->raw[i].loss;
        wall += r->raw[i].wall_s;
      }
      const double n = static_cast<double>(members.size());
      const double mean = sum / n;
      const double sd = std::sqrt(std::max(0.0, (sum_sq - n * mean * mean) / (n - 1)));
      const double m = smooth(g.ema_mean, g.count_mean, mean, smoothing_);
      const double d = smooth(g.ema_sd, g.count_sd, sd, smoothing_);
      const double x = by_wall ? wall / n : static_cast<double>(members.front()->raw[i].step);
      g.means.append(x, m);
      g.uppers.append(x, m + d);
      g.lowers.append(x, m - d);
    }
    g.steps = steps;
    set_graph_data(g.mean, g.means);
    set_graph_data(g.upper, g.uppers);
    set_graph_data(g.lower, g.lowers);
  }
}

std::vector<RunPlots::SeedGroup> RunPlots::shown_groups() const {
  std::vector<SeedGroup> out;
  for (const auto& g : groups_) out.push_back(g.group);
  return out;
}

QCPGraph* RunPlots::group_mean_graph(std::size_t group) const { return groups_.at(group).mean; }
QCPGraph* RunPlots::group_band_graph(std::size_t group, bool upper) const {
  return upper ? groups_.at(group).upper : groups_.at(group).lower;
}

void RunPlots::set_group_seeds(bool on) { group_seeds_->setChecked(on); }

void RunPlots::clear() {
  groups_.clear();  // their graphs go with the plot's below
  runs_.clear();
  run_list_->clear();
  legend_keys_.clear();
  update_legend_header();
  highlighted_ = soloed_ = -1;
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
  auto* r = find(p.run_id);
  if (!r) return;
  if (!r->raw.empty() && p.step <= r->raw.back().step) return;  // a resumed run repeats no step
  const double x = static_cast<double>(p.step);
  // A resumed launch (a promoted trial's next segment) counts its time from 0 again: go on from the last point.
  const double last_wall = r->raw.empty() ? 0.0 : r->raw.back().wall_s;
  if (!r->raw.empty() && p.wall_s + r->wall_offset < last_wall) r->wall_offset = last_wall - p.wall_s;
  r->raw.push_back(p);
  r->raw.back().wall_s = p.wall_s + r->wall_offset;
  const double wall = r->raw.back().wall_s;
  double loss = p.loss;
  for (std::size_t m = 0; m < kMetrics; ++m) {
    // The compression ratio and the bytes are step functions: smoothing would only bend their steps.
    const bool smoothed = m != kRatio && m != kWire;
    const double value = metric_value(p, static_cast<int>(m));
    const double y = smoothed ? smooth(r->ema[m], r->ema_count[m], value, smoothing_) : value;
    r->by_step[m].append(x, y);
    if (m == kLoss) loss = y;
  }
  r->loss_by_wall.append(wall, loss);
  if (smoothing_ > 0) {
    r->raw_loss_by_step.append(x, p.loss);
    r->raw_loss_by_wall.append(wall, p.loss);
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
      g->setPen(QPen(theme_.series_color(kBreakdownColours[m - kForward]), 1));
      r->breakdown.push_back(g);
      r->drawn_revision[static_cast<std::size_t>(m)] = ~0ull;
    }
  }
  bucket_stats_changed_ = true;
  refresh();
}

void RunPlots::restyle(Run& run) {
  QColor colour = theme_.series_color(run.index);
  const bool picked = highlighted_ == run.id;
  if (highlighted_ >= 0 && !picked) colour.setAlpha(45);
  const QPen pen(colour, picked ? 2.5 : 1);
  for (auto* g : {run.loss, run.ratio, run.wire}) {
    g->setPen(pen);
    if (picked) g->setLayer("overlay");  // above the others
    else if (g->layer()->name() != "main") g->setLayer("main");
  }
  QColor faint = colour;
  faint.setAlpha(std::min(colour.alpha(), 60));
  run.raw_loss->setPen(QPen(faint, 1));
  run.item->setIcon(0, swatch(theme_.series_color(run.index)));
  for (std::size_t m = 0; m < run.breakdown.size(); ++m)
    run.breakdown[m]->setPen(QPen(theme_.series_color(kBreakdownColours[m]), 1));
}

void RunPlots::apply_theme(const Theme& theme) {
  theme_ = theme;
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_, breakdown_plot_}) style_plot(p, theme_);
  for (auto& r : runs_) restyle(*r);
  restyle_groups();
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
    sync(kMetrics, r->raw_loss, by_wall ? r->raw_loss_by_wall : r->raw_loss_by_step);
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
  if (!groups_.empty() && std::find(changed.begin(), changed.end(), loss_plot_) != changed.end()) draw_groups();
  for (auto* p : changed) {
    p->rescaleAxes(true);
    widen_flat_range(p->yAxis);
    p->replot(immediate ? QCustomPlot::rpImmediateRefresh : QCustomPlot::rpQueuedReplot);
  }
}

int RunPlots::bucket_rows() const { return bucket_table_->rowCount(); }

QString RunPlots::csv() const {
  QString out = "run,label,step,loss,compression_ratio,wire_mb,forward_ms,backward_ms,comm_wait_ms,hook_ms\n";
  for (const auto& r : runs_) {
    QString label = r->label;
    label.replace('"', "\"\"");
    for (const auto& p : r->raw) {
      out += QString("%1,\"%2\",%3").arg(r->id).arg(label).arg(static_cast<qlonglong>(p.step));
      for (int m = kLoss; m < kMetrics; ++m) out += "," + QString::number(metric_value(p, m), 'g', 9);
      out += "\n";
    }
  }
  return out;
}

}  // namespace commtune::ui

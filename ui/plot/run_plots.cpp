#include "ui/plot/run_plots.h"

#include "ui/plot/plot_style.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QSplitter>
#include <QStackedLayout>
#include <QVBoxLayout>
#include <algorithm>
#include <cstdint>
#include <optional>

#include "ui/plot/bucket_table.h"
#include "ui/plot/group_curves.h"
#include "ui/plot/minmax_series.h"
#include "ui/plot/qcustomplot.h"
#include "ui/plot/trial_list.h"

namespace commtune::ui {

// Palette entries of the breakdown's forward, backward, comm wait and hook:
// blue, green, orange, magenta in either theme, every two at least 83
// degrees of CIELAB hue apart (thin lines side by side are told apart by
// hue: blue beside blue, or orange beside yellow, read as one).
constexpr std::size_t kBreakdownColours[] = {0, 2, 1, 14};

// A run as drawn: its curves' reduced copies and their graphs.
struct RunPlots::Run {
  static_assert(static_cast<std::size_t>(kMetrics) == SeriesModel::kMetrics, "a curve per LiveMetric, in its order");
  std::int64_t id = 0;
  QString label;
  std::size_t index = 0;  // colour
  bool visible = true;
  // Per metric, as drawn (the loss and the step times smoothed): against
  // step, and (loss only) against wall time; the raw loss, drawn faint under
  // the smoothed one while smoothing is on.
  std::vector<MinMaxSeries> by_step = std::vector<MinMaxSeries>(kMetrics, MinMaxSeries(kDrawnPoints));
  MinMaxSeries loss_by_wall{kDrawnPoints};
  // The faint raw curve at a quarter of the resolution: its min/max pairs show the noise's envelope,
  // and 30 of them stay within the frame budget (bench/plot_bench, smoothed).
  MinMaxSeries raw_loss_by_step{kDrawnPoints / 4}, raw_loss_by_wall{kDrawnPoints / 4};
  std::vector<std::uint64_t> drawn_revision = std::vector<std::uint64_t>(kMetrics + 1, ~0ull);
  QCPGraph* raw_loss = nullptr;
  QCPGraph* loss = nullptr;
  QCPGraph* ratio = nullptr;
  QCPGraph* wire = nullptr;
  std::vector<QCPGraph*> breakdown;  // forward, backward, comm wait, hook: only for the chosen run
};

RunPlots::RunPlots(QWidget* parent) : QWidget(parent), theme_(current_theme()) {
  loss_plot_ = make_plot("Loss", "loss (mean over ranks)", this);
  ratio_plot_ = make_plot("Compression ratio", "fp32 bytes / wire bytes", this);
  wire_plot_ = make_plot("Bytes on the wire", "MB per step per rank", this);
  breakdown_plot_ = make_plot("Step time", "ms", this);
  loss_plot_->addLayer("raw", loss_plot_->layer("main"), QCustomPlot::limBelow);
  groups_ = std::make_unique<GroupCurves>(loss_plot_, kDrawnPoints);
  for (auto* plot : {loss_plot_, ratio_plot_, wire_plot_, breakdown_plot_}) {
    auto* readout = new PlotReadout(plot, [this, plot](const QPointF& at) { return curve_hit(plot, at); });
    readouts_.push_back(readout);
    connect(readout, &PlotReadout::clicked, this, &RunPlots::runs_clicked);
  }
  // The parts' legend in a row of its own under the title, side by side: inside the axes it covered the
  // curves' right end, the newest steps.
  auto* legend = breakdown_plot_->legend;
  breakdown_plot_->plotLayout()->insertRow(1);
  breakdown_plot_->plotLayout()->addElement(1, 0, legend);  // taken from the axes' inset
  breakdown_plot_->plotLayout()->setRowStretchFactor(1, 0.001);
  legend->setFillOrder(QCPLegend::foColumnsFirst);
  legend->setVisible(true);
  legend->setFont(QFont(font().family(), 8));

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

  trial_list_ = new TrialList(this);
  connect(trial_list_, &TrialList::run_checked, this, [this](qint64 run_id, bool checked) {
    auto* run = find(run_id);
    if (!run || run->visible == checked) return;
    run->visible = checked;
    soloed_.clear();
    visibility_changed();
  });
  connect(trial_list_, &TrialList::solo_requested, this,
          [this](const std::vector<std::int64_t>& run_ids) { solo(run_ids); });
  connect(trial_list_, &TrialList::hovered, this, [this](qint64 run_id) { highlight(run_id); });
  connect(trial_list_, &TrialList::show_all_requested, this, [this] { show_all(); });
  connect(trial_list_, &TrialList::hide_all_requested, this, [this] {
    for (auto& r : runs_) r->visible = false;
    soloed_.clear();
    visibility_changed();
  });
  breakdown_run_ = new QComboBox(this);
  breakdown_run_->setObjectName("plots:breakdown_run");
  breakdown_run_->setToolTip("The run whose step time is broken down (forward, backward, comm wait, hook)");
  // It takes the row's room left; a trial's long label must not widen the row past a laptop's screen.
  breakdown_run_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  breakdown_run_->setMinimumContentsLength(16);
  connect(x_axis_, &QComboBox::currentIndexChanged, this, [this] {
    axis_changed_ = true;
    for (auto& r : runs_) r->drawn_revision[kLoss] = r->drawn_revision[kMetrics] = ~0ull;
    refresh();
  });
  connect(breakdown_run_, &QComboBox::currentIndexChanged, this, [this] { update_breakdown_choice(); });

  bucket_table_ = new BucketTable(this);

  group_by_ = new QComboBox(this);
  group_by_->setObjectName("plots:group_by");
  group_by_->setToolTip("Runs drawn as one curve: their mean loss, with a band of one standard deviation either "
                        "side. Seeds: runs that differ only in their seed (labels ending seed=N); a parameter: the "
                        "runs that share its value");
  // As wide as a short name: a long parameter's would widen the row past a laptop's screen.
  group_by_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  group_by_->setMinimumContentsLength(11);
  group_by_->addItem("no grouping");
  group_by_->addItem("seeds", QString());
  connect(group_by_, &QComboBox::currentIndexChanged, this, [this] {
    group_choice_ = group_by_->currentData();
    regroup();
  });

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel("Group", this));
  controls->addWidget(group_by_);
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
  plots_box->addWidget(trial_list_);
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
  std::vector<std::pair<std::string, std::string>> named;
  for (const auto& [param, value] : values) named.emplace_back(param.toStdString(), value.toStdString());
  model_.add_run(run_id, label.toStdString(), std::move(named));
  auto run = std::make_unique<Run>();
  run->id = run_id;
  run->label = label;
  run->index = runs_.size();
  run->loss = loss_plot_->addGraph();
  run->raw_loss = loss_plot_->addGraph();
  run->raw_loss->setLayer("raw");  // under every smoothed curve
  run->raw_loss->setVisible(smoothing() > 0);
  run->raw_loss->removeFromLegend();
  run->ratio = ratio_plot_->addGraph();
  run->wire = wire_plot_->addGraph();
  run->loss->setName(label);
  trial_list_->add_run(run_id, label, values);
  restyle(*run);
  runs_.push_back(std::move(run));
  breakdown_run_->addItem(label, QVariant::fromValue<qlonglong>(run_id));
  static_cast<QStackedLayout*>(layout())->setCurrentIndex(1);
  update_group_choices();  // a new run joins its group, and may make a parameter vary
}

void RunPlots::update_group_choices() {
  const int before = group_by_->currentIndex();
  {
    const QSignalBlocker quiet(group_by_);
    while (group_by_->count() > 2) group_by_->removeItem(2);  // after "no grouping" and "seeds"
    for (const auto& param : model_.group_parameters())
      group_by_->addItem(QString::fromStdString(param), QString::fromStdString(param));
    const int chosen = group_choice_.isValid() ? group_by_->findData(group_choice_) : 0;
    group_by_->setCurrentIndex(std::max(chosen, 0));
  }
  if (group_by_->currentData().isValid() || group_by_->currentIndex() != before) regroup();
}

bool RunPlots::has_run(std::int64_t run_id) const { return find(run_id) != nullptr; }

RunPlots::Run* RunPlots::find(std::int64_t run_id) const {
  for (const auto& r : runs_)
    if (r->id == run_id) return r.get();
  return nullptr;
}

QTreeWidget* RunPlots::run_list() const { return trial_list_; }

std::optional<PlotHit> RunPlots::curve_hit(QCustomPlot* plot, const QPointF& pixel) const {
  const auto near = nearest_point(plot, pixel);
  if (!near) return std::nullopt;
  if (plot == loss_plot_)
    if (auto group = groups_->hit(*near, x_axis_->currentIndex() == 1, smoothing() > 0)) return group;
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
                         : near->graph == r->loss && smoothing() > 0
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

std::size_t RunPlots::points(std::int64_t run_id) const { return model_.points(run_id).size(); }

std::vector<LivePoint> RunPlots::points_of(std::int64_t run_id) const { return model_.points(run_id); }

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
  if (find(run_id)) trial_list_->set_checked(run_id, visible);  // back through run_checked
}

bool RunPlots::run_visible(std::int64_t run_id) const {
  const auto* run = find(run_id);
  return run && run->visible;
}

void RunPlots::solo(std::int64_t run_id) { solo(std::vector<std::int64_t>{run_id}); }

void RunPlots::solo(const std::vector<std::int64_t>& run_ids) {
  if (soloed_ == run_ids) return show_all();
  for (auto& r : runs_) r->visible = std::find(run_ids.begin(), run_ids.end(), r->id) != run_ids.end();
  soloed_ = run_ids;
  visibility_changed();
}

void RunPlots::show_all() {
  for (auto& r : runs_) r->visible = true;
  soloed_.clear();
  visibility_changed();
}

void RunPlots::highlight(std::int64_t run_id) {
  if (highlighted_ == run_id) return;
  highlighted_ = run_id;
  for (auto& r : runs_) restyle(*r);
  restyle_groups();
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_}) p->replot(QCustomPlot::rpQueuedReplot);
}

void RunPlots::visibility_changed() {
  QSignalBlocker block(trial_list_);
  for (auto& r : runs_) {
    trial_list_->set_checked(r->id, r->visible);
    const bool grouped = groups_->group_of(r->id).has_value();
    for (auto* g : {r->ratio, r->wire}) g->setVisible(r->visible);
    r->loss->setVisible(r->visible && !grouped);  // its group's mean and band stand for it
    r->raw_loss->setVisible(r->visible && !grouped && smoothing() > 0);
  }
  groups_->set_visible([this](std::int64_t id) { return run_visible(id); });
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_}) {
    p->rescaleAxes(true);
    widen_flat_range(p->yAxis);
    p->replot(QCustomPlot::rpQueuedReplot);
  }
}

void RunPlots::set_smoothing(double weight) {
  weight = std::clamp(weight, 0.0, 0.99);
  if (weight == smoothing()) return;
  model_.set_smoothing(weight);
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
  std::fill(run.drawn_revision.begin(), run.drawn_revision.end(), ~0ull);  // new series restart their revisions
  for (const auto& p : model_.take_points(run.id)) append(p);
  groups_->restart(run.id);  // its group's aggregate is redrawn from the first step at the next refresh
}

void RunPlots::merge(std::int64_t run_id, const std::vector<LivePoint>& points) {
  if (auto* run = find(run_id); run && model_.merge(run_id, points)) redraw_from_raw(*run);
}

void RunPlots::truncate(std::int64_t run_id, std::int64_t step) {
  if (auto* run = find(run_id); run && model_.truncate(run_id, step)) redraw_from_raw(*run);
}

std::vector<RunPlots::SeedGroup> RunPlots::seed_groups() const { return model_.seed_groups(); }

void RunPlots::regroup() {
  const auto by = group_by_->currentData();
  groups_->set(by.isValid() ? model_.groups_by(by.toString().toStdString()) : std::vector<SeedGroup>{});
  std::vector<SeedGroup> listed;
  for (std::size_t i = 0; i < groups_->size(); ++i) listed.push_back(groups_->group(i));
  trial_list_->set_groups(listed);  // the legend lists the groups, not their runs
  restyle_groups();
  groups_->draw(model_, x_axis_->currentIndex() == 1);
  visibility_changed();
}

void RunPlots::restyle_groups() {
  groups_->restyle(
      [this](std::int64_t id) {
        const auto* run = find(id);
        return theme_.series_color(run ? run->index : 0);
      },
      highlighted_);
}

std::vector<RunPlots::SeedGroup> RunPlots::shown_groups() const {
  std::vector<SeedGroup> out;
  for (std::size_t i = 0; i < groups_->size(); ++i) out.push_back(groups_->group(i));
  return out;
}

QCPGraph* RunPlots::group_mean_graph(std::size_t group) const { return groups_->mean(group); }
QCPGraph* RunPlots::group_band_graph(std::size_t group, bool upper) const { return groups_->band(group, upper); }

void RunPlots::set_group_seeds(bool on) { group_by_->setCurrentIndex(on ? 1 : 0); }

bool RunPlots::set_group_by(const QString& param) {
  const int index = group_by_->findData(param);
  if (index >= 0) group_by_->setCurrentIndex(index);
  return index >= 0;
}

void RunPlots::clear() {
  groups_->forget();  // their graphs go with the plot's below
  runs_.clear();
  model_.clear();
  trial_list_->forget();
  highlighted_ = -1;
  soloed_.clear();
  for (auto* p : {loss_plot_, ratio_plot_, wire_plot_, breakdown_plot_}) {
    p->clearGraphs();
    p->replot();
  }
  breakdown_run_->clear();
  bucket_table_->forget();
  update_group_choices();  // none of the last runs' parameters is offered
  static_cast<QStackedLayout*>(layout())->setCurrentIndex(0);
}

void RunPlots::append(const LivePoint& p) {
  auto* r = find(p.run_id);
  if (!r) return;
  const auto appended = model_.append(p);
  if (!appended) return;
  const double x = static_cast<double>(p.step);
  const double wall = appended->point.wall_s;
  for (std::size_t m = 0; m < kMetrics; ++m) r->by_step[m].append(x, appended->drawn[m]);
  r->loss_by_wall.append(wall, appended->drawn[kLoss]);
  if (smoothing() > 0) {
    r->raw_loss_by_step.append(x, p.loss);
    r->raw_loss_by_wall.append(wall, p.loss);
  }
}

void RunPlots::set_bucket_stats(const BucketStats& stats) { bucket_table_->set_stats(stats); }

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
  bucket_table_->show_run(chosen);
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
  trial_list_->set_colour(run.id, theme_.series_color(run.index));
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
  bucket_table_->refresh();
  if (!groups_->empty() && std::find(changed.begin(), changed.end(), loss_plot_) != changed.end())
    groups_->draw(model_, by_wall);  // the steps every replica has reached since the last call
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
    for (const auto& p : model_.points(r->id)) {
      out += QString("%1,\"%2\",%3").arg(r->id).arg(label).arg(static_cast<qlonglong>(p.step));
      for (int m = kLoss; m < kMetrics; ++m)
        out += "," + QString::number(live_metric(p, static_cast<LiveMetric>(m)), 'g', 9);
      out += "\n";
    }
  }
  return out;
}

}  // namespace commtune::ui

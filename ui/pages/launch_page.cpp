#include "ui/pages/launch_page.h"

#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>

#include "core/tuner/config/run_config.h"
#include "core/tuner/config/hook_activity.h"
#include "core/tuner/schema/param_schema.h"
#include "ui/forms/config_form.h"
#include "ui/forms/sweep_editor.h"

namespace commtune::ui {

LaunchPage::LaunchPage(QWidget* parent) : QWidget(parent) {
  form_ = new ConfigForm(this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  scroll->setWidget(form_);
  scroll->setMinimumWidth(420);

  run_name_ = new QLineEdit(this);
  run_name_->setObjectName("launch:run_name");
  run_name_->setPlaceholderText("optional: a name to find the run by");
  run_ = new QPushButton("Start run", this);
  run_->setObjectName("launch:run");
  run_->setToolTip("Launch one run with this configuration (Ctrl+R)");
  auto* run_tab = new QWidget(this);
  auto* run_layout = new QFormLayout(run_tab);
  run_layout->addRow("Name", run_name_);
  run_layout->addRow(run_);
  auto* hint = new QLabel(
      "The run trains on this machine: one process per rank over Gloo on CPU (NCCL on GPUs), with the "
      "communication hook chosen on the left. Curves appear on the Dashboard as steps finish; the run is "
      "stored and shows up under Runs.",
      run_tab);
  hint->setWordWrap(true);
  hint->setEnabled(false);
  run_layout->addRow(hint);

  sweep_ = new SweepEditor(form_, this);
  start_sweep_ = new QPushButton("Start sweep", this);
  start_sweep_->setObjectName("launch:sweep");
  start_sweep_->setToolTip("Run every trial of the sweep (Ctrl+Shift+R)");
  auto* sweep_tab = new QWidget(this);
  auto* sweep_layout = new QVBoxLayout(sweep_tab);
  sweep_layout->addWidget(sweep_, 1);
  sweep_layout->addWidget(start_sweep_);

  // The sweep's form is taller than a laptop's screen: it scrolls, so the
  // window's minimum height stays the pages' own, not the form's.
  auto* sweep_scroll = new QScrollArea(this);
  sweep_scroll->setObjectName("launch:sweep_scroll");
  sweep_scroll->setWidgetResizable(true);
  sweep_scroll->setFrameShape(QFrame::NoFrame);
  sweep_scroll->setWidget(sweep_tab);

  mode_ = new QTabWidget(this);
  mode_->setObjectName("launch:mode");
  mode_->addTab(run_tab, "Single run");
  mode_->addTab(sweep_scroll, "Sweep");

  problem_ = new QLabel(this);
  problem_->setObjectName("launch:problem");
  problem_->setWordWrap(true);
  problem_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* right = new QWidget(this);
  auto* right_layout = new QVBoxLayout(right);
  right_layout->addWidget(mode_, 1);
  right_layout->addWidget(problem_);
  auto* splitter = new QSplitter(this);
  splitter->setObjectName("launch:splitter");
  splitter->addWidget(scroll);
  splitter->addWidget(right);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setSizes({780, 520});
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(splitter);

  connect(form_, &ConfigForm::changed, this, &LaunchPage::update_state);
  connect(sweep_, &SweepEditor::changed, this, &LaunchPage::update_state);
  connect(mode_, &QTabWidget::currentChanged, this, &LaunchPage::update_state);
  connect(run_, &QPushButton::clicked, this, [this] { Q_EMIT run_requested(form_->raw(), run_name_->text()); });
  connect(start_sweep_, &QPushButton::clicked, this, [this] { Q_EMIT sweep_requested(sweep_->spec()); });
  update_state();
}

QString LaunchPage::problem_text() const { return problem_->text(); }

void LaunchPage::set_engine_busy(bool busy) {
  busy_ = busy;
  update_state();
}

void LaunchPage::show_sweep(bool sweep) { mode_->setCurrentIndex(sweep ? 1 : 0); }

std::string LaunchPage::single_run_warning() const {
  try {
    return hook_inactivity_warning(RunConfig::parse(form_->raw()).to_json());
  } catch (const std::exception&) {  // the form names its own problem
    return "";
  }
}

void LaunchPage::update_state() {
  const bool sweep_mode = mode_->currentIndex() == 1;
  const QString problem = sweep_mode ? sweep_->problem() : form_->problem();
  run_->setEnabled(!busy_ && form_->problem().isEmpty());
  start_sweep_->setEnabled(!busy_ && sweep_->problem().isEmpty());
  start_sweep_->setText(sweep_->problem().isEmpty() ? QString("Start sweep (%1 trials)").arg(sweep_->trials())
                                                    : QString("Start sweep"));
  if (!problem.isEmpty()) {
    problem_->setStyleSheet("color: #d9534f;");
    problem_->setText(problem);
  } else if (const auto warning = sweep_mode ? std::string() : single_run_warning(); !busy_ && !warning.empty()) {
    problem_->setStyleSheet("color: #c77c02;");
    problem_->setText(QString("Ready to run, but: %1.").arg(QString::fromStdString(warning)));
  } else {
    problem_->setStyleSheet({});
    problem_->setText(busy_        ? "A job is running: stop it on the Dashboard to start another."
                      : sweep_mode ? QString("Ready: %1 trials.").arg(sweep_->trials())
                                   : QString("Ready to run."));
  }
}

void LaunchPage::load_json(const nlohmann::json& json) {
  if (json.is_object() && json.contains("axes")) {
    form_->set_raw(json.value("base", nlohmann::json::object()));
    sweep_->set_spec(json);
    show_sweep(true);
  } else {
    form_->set_raw(json);
    show_sweep(false);
  }
}

nlohmann::json LaunchPage::current_json() const { return mode_->currentIndex() == 1 ? sweep_->spec() : form_->raw(); }

}  // namespace commtune::ui

#include "ui/forms/sweep_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QAbstractItemView>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include "core/tuner/config/run_config.h"
#include "core/tuner/sweep/sweep_spec.h"
#include "ui/forms/config_form.h"
#include "ui/forms/param_field.h"

namespace commtune::ui {

namespace {
enum Column { kParam = 0, kValues, kPoints, kLog, kColumns };

std::vector<std::pair<std::string, ParamSpec>> option_specs() {
  std::vector<std::pair<std::string, ParamSpec>> out;
  for (auto& s : SweepOptions::schema().specs()) out.emplace_back(s.name, s);  // the sweep's name first
  for (auto& s : EarlyStoppingOptions::schema().specs()) out.emplace_back("early_stopping." + s.name, s);
  // Where SLURM trials run (backend slurm); extra sbatch lines come from a spec file.
  for (auto& s : SlurmOptions::schema().specs()) out.emplace_back("slurm." + s.name, s);
  return out;
}
}  // namespace

SweepEditor::SweepEditor(ConfigForm* base, QWidget* parent) : QWidget(parent), base_(base) {
  axes_ = new QTableWidget(0, kColumns, this);
  axes_->setObjectName("sweep:axes");
  axes_->setHorizontalHeaderLabels({"parameter", "values", "points", "log"});
  axes_->horizontalHeaderItem(kValues)->setToolTip("A list (1, 2, 4) or a range (0.01 .. 0.1) with its points");
  // Room for a name like hook.matrix_approximation_rank; the values take what is left.
  axes_->horizontalHeader()->setSectionResizeMode(kParam, QHeaderView::Interactive);
  axes_->setColumnWidth(kParam, 240);
  axes_->horizontalHeader()->setSectionResizeMode(kValues, QHeaderView::Stretch);
  axes_->horizontalHeader()->setSectionResizeMode(kPoints, QHeaderView::ResizeToContents);
  axes_->horizontalHeader()->setSectionResizeMode(kLog, QHeaderView::ResizeToContents);
  axes_->verticalHeader()->setVisible(false);
  axes_->setMinimumHeight(140);

  auto* add = new QPushButton("Add axis", this);
  add->setObjectName("sweep:add_axis");
  auto* remove = new QPushButton("Remove axis", this);
  remove->setObjectName("sweep:remove_axis");
  connect(add, &QPushButton::clicked, this, [this] { add_axis(); });
  connect(remove, &QPushButton::clicked, this, [this] {
    axes_->removeRow(axes_->currentRow() >= 0 ? axes_->currentRow() : axes_->rowCount() - 1);
    revalidate();
  });
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add);
  buttons->addWidget(remove);
  buttons->addStretch();

  auto* options_box = new QGroupBox("Search", this);
  auto* form = new QFormLayout(options_box);
  options_form_ = form;
  for (auto& [path, spec] : option_specs()) {
    auto* f = new ParamField(spec, "sweep." + QString::fromStdString(path), options_box);
    form->addRow(QString::fromStdString(path), f);
    options_[QString::fromStdString(path)] = f;
    connect(f, &ParamField::edited, this,
            [this, p = QString::fromStdString(path)](const QString&, const QString& t) { set_option(p, t); });
  }

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* axes_box = new QGroupBox("Axes (every combination, or random draws)", this);
  auto* axes_layout = new QVBoxLayout(axes_box);
  axes_layout->addWidget(axes_);
  axes_layout->addLayout(buttons);
  layout->addWidget(axes_box, 1);
  layout->addWidget(options_box);
  connect(base_, &ConfigForm::changed, this, &SweepEditor::revalidate);
  revalidate();
}

void SweepEditor::set_option(const QString& path, const QString& text) {
  auto* f = options_.at(path);
  const auto key = path.toStdString();
  try {
    const auto value = check_param(f->spec(), parse_param_text(f->spec(), text.toStdString(), key), key);
    const auto dot = key.find('.');
    if (dot == std::string::npos)
      option_values_[key] = value;
    else
      option_values_[key.substr(0, dot)][key.substr(dot + 1)] = value;
    f->set_error({});
  } catch (const ConfigError& e) {
    f->set_error(QString::fromStdString(e.problem()));
  }
  if (f->text() != text) f->show_text(text);
  revalidate();
}

void SweepEditor::add_axis(const QString& param, const QString& values, int points, bool log) {
  const auto chosen = param.isEmpty() ? next_axis_param() : param;
  const int row = axes_->rowCount();
  axes_->insertRow(row);
  auto* name = new QComboBox(axes_);
  name->setEditable(true);
  name->addItems(base_->axis_paths());
  name->setCurrentText(chosen);
  // The list in the form's own font, as wide as its longest name.
  name->view()->setFont(font());
  name->view()->setMinimumWidth(name->view()->sizeHintForColumn(0) + 2 * name->view()->frameWidth() + 24);
  auto* text = new QLineEdit(values, axes_);
  text->setPlaceholderText("1, 2, 4  or  0.01 .. 0.1");
  auto* count = new QSpinBox(axes_);
  count->setRange(0, 1000);
  count->setValue(points);
  count->setToolTip("For a range: how many grid points (0 for random search draws)");
  auto* log_box = new QCheckBox(axes_);
  log_box->setChecked(log);
  axes_->setCellWidget(row, kParam, name);
  axes_->setCellWidget(row, kValues, text);
  axes_->setCellWidget(row, kPoints, count);
  axes_->setCellWidget(row, kLog, log_box);
  connect(name, &QComboBox::currentTextChanged, this, &SweepEditor::revalidate);
  connect(text, &QLineEdit::textChanged, this, &SweepEditor::revalidate);
  connect(count, &QSpinBox::valueChanged, this, &SweepEditor::revalidate);
  connect(log_box, &QCheckBox::toggled, this, &SweepEditor::revalidate);
  revalidate();
}

QStringList SweepEditor::axis_params() const {
  QStringList out;
  for (int row = 0; row < axes_->rowCount(); ++row)
    out << static_cast<QComboBox*>(axes_->cellWidget(row, kParam))->currentText().trimmed();
  return out;
}

QString SweepEditor::next_axis_param() const {
  // What is most often swept, for the hook the base form has chosen, then anything not swept yet.
  const auto paths = base_->axis_paths();
  const auto taken = axis_params();
  QStringList preferred{"optimizer.lr",
                        "hook.matrix_approximation_rank",
                        "hook.start_powerSGD_iter",
                        "hook.byteps_compressor_type",
                        "hook.byteps_compressor_k",
                        "hook.slowmo_momentum",
                        "hook.slowmo_lr",
                        "seed"};
  preferred << paths;
  for (const auto& p : preferred)
    if (paths.contains(p) && !taken.contains(p)) return p;
  return paths.value(0);
}

nlohmann::json SweepEditor::axes_json() const {
  nlohmann::json axes = nlohmann::json::object();
  for (int row = 0; row < axes_->rowCount(); ++row) {
    const auto param = static_cast<QComboBox*>(axes_->cellWidget(row, kParam))->currentText().trimmed().toStdString();
    const auto text = static_cast<QLineEdit*>(axes_->cellWidget(row, kValues))->text().trimmed();
    const auto field = "axes." + param;
    const auto spec = param_spec(base_->raw(), param);  // throws for unknown names, with a hint
    if (text.isEmpty()) throw ConfigError(field, "give values (1, 2, 4) or a range (0.01 .. 0.1)");
    if (text.contains("..")) {
      const auto ends = text.split("..");
      bool ok_min = false, ok_max = false;
      const double lo = ends.value(0).trimmed().toDouble(&ok_min), hi = ends.value(1).trimmed().toDouble(&ok_max);
      if (ends.size() != 2 || !ok_min || !ok_max) throw ConfigError(field, "a range reads like 0.01 .. 0.1");
      nlohmann::json range{{"min", lo}, {"max", hi}};
      if (const int points = static_cast<QSpinBox*>(axes_->cellWidget(row, kPoints))->value()) range["points"] = points;
      if (static_cast<QCheckBox*>(axes_->cellWidget(row, kLog))->isChecked()) range["log"] = true;
      axes[param] = range;
    } else {
      nlohmann::json values = nlohmann::json::array();
      for (const auto& v : text.split(',', Qt::SkipEmptyParts))
        values.push_back(parse_param_text(spec, v.trimmed().toStdString(), field));
      axes[param] = values;
    }
  }
  return axes;
}

nlohmann::json SweepEditor::spec() const {
  nlohmann::json spec = option_values_;
  if (spec.value("backend", "local") != "slurm") spec.erase("slurm");  // kept in the form for when it is chosen
  spec["base"] = base_->raw();
  spec["axes"] = axes_json();
  return spec;
}

void SweepEditor::set_spec(const nlohmann::json& spec) {
  const auto parsed = SweepSpec::parse(spec);  // throws before anything changes
  axes_->setRowCount(0);
  option_values_ = nlohmann::json::object();
  for (auto& [path, f] : options_) {
    const auto key = path.toStdString();
    const auto dot = key.find('.');
    const nlohmann::json* value = nullptr;
    if (dot == std::string::npos && spec.contains(key))
      value = &spec[key];
    else if (dot != std::string::npos && spec.contains(key.substr(0, dot)) &&
             spec[key.substr(0, dot)].contains(key.substr(dot + 1)))
      value = &spec[key.substr(0, dot)][key.substr(dot + 1)];
    f->set_value(value ? *value : nlohmann::json());
    if (value) set_option(path, f->text());
  }
  if (spec.contains("slurm") && spec["slurm"].is_object() && spec["slurm"].contains("sbatch"))
    option_values_["slurm"]["sbatch"] = spec["slurm"]["sbatch"];  // no field of its own: kept as the file has it
  for (const auto& axis : parsed.axes) {
    QString values;
    if (axis.min) {
      values = QString::number(*axis.min, 'g', 12) + " .. " + QString::number(*axis.max, 'g', 12);
    } else {
      QStringList parts;
      for (const auto& v : axis.values) parts << value_text(v);
      values = parts.join(", ");
    }
    add_axis(QString::fromStdString(axis.param), values, static_cast<int>(axis.points), axis.log);
  }
  revalidate();
}

void SweepEditor::revalidate() {
  problem_.clear();
  trials_ = 0;
  for (const auto& [path, f] : options_)
    if (f->has_error()) problem_ = path + ": " + f->error();
  if (problem_.isEmpty() && !base_->problem().isEmpty()) problem_ = "base." + base_->problem();
  if (problem_.isEmpty()) {
    try {
      const auto s = spec();
      if (s["axes"].empty()) throw ConfigError("axes", "add at least one axis");
      trials_ = static_cast<int>(plan_trials(SweepSpec::parse_new(s)).size());
    } catch (const std::exception& e) {
      problem_ = QString::fromUtf8(e.what());
    }
  }
  show_chosen_options();
  Q_EMIT changed();
}

void SweepEditor::show_chosen_options() {
  // TPE's own fields only for TPE, SLURM's only for the SLURM backend; the other rows are hidden.
  const auto chosen = [this](const char* key, const char* fallback) {
    return option_values_.contains(key) && option_values_[key].is_string() ? option_values_[key].get<std::string>()
                                                                           : std::string(fallback);
  };
  const bool tpe = chosen("strategy", "grid") == "tpe";
  const bool slurm = chosen("backend", "local") == "slurm";
  for (const auto& [path, f] : options_) {
    bool shown = true;
    if (path.startsWith("tpe_")) shown = tpe;
    if (path.startsWith("slurm.")) shown = slurm;
    options_form_->setRowVisible(f, shown);
  }
}

}  // namespace commtune::ui

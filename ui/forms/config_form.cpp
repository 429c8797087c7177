#include "ui/forms/config_form.h"

#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <optional>

#include "core/tuner/config/command_line.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/launch/job.h"
#include "ui/forms/param_field.h"

namespace commtune::ui {

namespace {

QString title_of(const std::string& section) {
  static const std::map<std::string, QString> titles{{"model", "Model"},
                                                     {"data", "Data"},
                                                     {"optimizer", "Optimizer"},
                                                     {"hook", "Communication hook"},
                                                     {"ddp", "DDP reducer"},
                                                     {"weights", "Weights (advanced)"},
                                                     {"checkpoint", "Checkpoints"},
                                                     {"network", "Network emulation"},
                                                     {"debug", "Debugging (advanced)"},
                                                     {"script", "Your own training script (instead of the model)"}};
  const auto it = titles.find(section);
  return it != titles.end() ? it->second : QString::fromStdString(section);
}

bool is_number(const ParamSpec& spec) { return spec.kind == ParamKind::Integer || spec.kind == ParamKind::Real; }

// The script's own options and arguments, each one line of the form (not one
// field per word): script.args as NAME=VALUE words, script.argv as a shell
// would split the line.
constexpr const char* kScriptOptions = "script.options";
constexpr const char* kScriptArguments = "script.arguments";

std::optional<ParamSpec> script_line_spec(const std::string& path) {
  if (path != kScriptOptions && path != kScriptArguments) return std::nullopt;
  ParamSpec spec;
  spec.name = path.substr(7);
  spec.default_value = "";
  spec.doc = path == kScriptOptions
                 ? "the script's named options, NAME=VALUE each, passed as --NAME VALUE (script.args; a sweep "
                   "axis over one reads script.args.NAME)"
                 : "the script's own arguments after its named options, split as a shell splits them (quotes "
                   "kept together; script.argv)";
  return spec;
}

nlohmann::json script_line_text(const nlohmann::json& raw, const std::string& path) {
  try {
    const auto script = ScriptOptions::parse(raw.value("script", nlohmann::json::object()));
    return path == kScriptOptions ? script.args_text() : join_command_line(script.argv);
  } catch (const ConfigError&) {  // the section's own problem shows on its field
    return "";
  }
}

// Sets one of those lines in raw: the section's args or argv, gone when the line is empty.
void set_script_line(nlohmann::json& raw, const std::string& path, const std::string& text) {
  const bool options = path == kScriptOptions;
  const nlohmann::json value = options ? ScriptOptions::args_from_text(text)
                                       : nlohmann::json(split_command_line(text, "script.argv"));
  auto& script = raw["script"];
  if (!script.is_object()) script = nlohmann::json::object();
  const char* key = options ? "args" : "argv";
  if (value.empty())
    script.erase(key);
  else
    script[key] = value;
  if (script.empty()) raw.erase("script");
}

}  // namespace

ConfigForm::ConfigForm(QWidget* parent) : QWidget(parent), schema_(describe_schema()) {
  groups_ = new QVBoxLayout(this);
  groups_->setContentsMargins(0, 0, 0, 0);
  rebuild();
  revalidate();
}

ParamField* ConfigForm::field(const QString& path) const {
  const auto it = fields_.find(path);
  return it == fields_.end() ? nullptr : it->second;
}

void ConfigForm::rebuild() {
  fields_.clear();
  order_.clear();
  if (content_) {  // out of sight now; deleted once the signal that got here has returned
    content_->hide();
    groups_->removeWidget(content_);
    content_->deleteLater();
  }
  content_ = new QWidget(this);
  // Two columns: what a user changes first (the hook, the run, model and
  // data) on the left, the rest beside it, so nothing is below the fold.
  auto* columns = new QHBoxLayout(content_);
  columns->setContentsMargins(0, 0, 0, 0);
  QVBoxLayout* first_column = new QVBoxLayout;
  QVBoxLayout* second_column = new QVBoxLayout;
  columns->addLayout(first_column, 1);
  columns->addLayout(second_column, 1);
  QVBoxLayout* column = first_column;
  groups_->addWidget(content_);

  auto add_field = [&](QFormLayout* form, const std::string& path_text) {
    const QString path = QString::fromStdString(path_text);
    const auto dot = path_text.find('.');
    const auto section = dot == std::string::npos ? std::string() : path_text.substr(0, dot);
    const auto key = dot == std::string::npos ? path_text : path_text.substr(dot + 1);
    const auto script_line = script_line_spec(path_text);
    auto* f = new ParamField(script_line ? *script_line : param_spec(raw_, path_text), path, content_);
    const nlohmann::json* value = nullptr;
    nlohmann::json line;
    if (script_line) {
      line = script_line_text(raw_, path_text);
      value = &line;
    } else if (section.empty() && raw_.contains(key)) {
      value = &raw_[key];
    } else if (!section.empty() && raw_.contains(section) && raw_[section].contains(key)) {
      value = &raw_[section][key];
    }
    f->set_value(value ? *value : nlohmann::json());
    if (const auto e = field_errors_.find(path); e != field_errors_.end()) f->set_error(e->second);
    connect(f, &ParamField::edited, this, [this](const QString& p, const QString& t) {
      if (apply(p, t))  // the sender is about to go: rebuild once its signal has returned
        QMetaObject::invokeMethod(
            this, [this] { rebuild(); }, Qt::QueuedConnection);
      revalidate();
    });
    form->addRow(QString::fromStdString(key), f);
    fields_[path] = f;
    order_ << path;
  };
  auto make_group = [&](const QString& title) {
    auto* box = new QGroupBox(title, content_);
    box->setObjectName("group:" + title);
    auto* form = new QFormLayout(box);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    column->addWidget(box);
    return form;
  };

  // The hook first: it is what commtune tunes.
  std::vector<nlohmann::json> sections;
  for (const auto& s : schema_["sections"])
    if (s["section"] == "hook") sections.insert(sections.begin(), s);
    else sections.push_back(s);
  auto add_section = [&](const nlohmann::json& s) {
    const auto section = s["section"].get<std::string>();
    if (section == "optimizer") column = second_column;
    auto* form = make_group(title_of(section));
    if (!s.contains("entries")) {
      for (const auto& p : s["params"]) add_field(form, section + "." + p["name"].get<std::string>());
      if (section == "script")
        for (const auto* line : {kScriptOptions, kScriptArguments}) add_field(form, line);
      return;
    }
    add_field(form, section + ".name");
    const std::string chosen = raw_.contains(section) && raw_[section].contains("name")
                                   ? raw_[section]["name"].get<std::string>()
                                   : s["default"].get<std::string>();
    for (const auto& p : s["common"]) add_field(form, section + "." + p["name"].get<std::string>());
    for (const auto& e : s["entries"]) {
      if (e["name"] != chosen) continue;
      auto* doc = new QLabel(QString::fromStdString(e.value("doc", "")), content_);
      doc->setWordWrap(true);
      doc->setEnabled(false);
      form->insertRow(1, QString(), doc);
      for (const auto& p : e["params"]) add_field(form, section + "." + p["name"].get<std::string>());
    }
  };
  add_section(sections.front());
  auto* run = make_group("Run");
  for (const auto& p : schema_["root"]) add_field(run, p["name"].get<std::string>());
  for (std::size_t i = 1; i < sections.size(); ++i) add_section(sections[i]);
  first_column->addStretch();
  second_column->addStretch();
  revalidate();
}

bool ConfigForm::apply(const QString& path, const QString& text) {
  const auto path_text = path.toStdString();
  field_errors_.erase(path);
  try {
    if (script_line_spec(path_text)) {
      set_script_line(raw_, path_text, text.toStdString());
      if (auto* f = field(path)) f->set_error({});
      return false;
    }
    const auto spec = param_spec(raw_, path_text);
    const auto dot = path_text.find('.');
    if (text.isEmpty() && is_number(spec)) {  // an emptied number field means the default
      if (dot == std::string::npos)
        raw_.erase(path_text);
      else if (raw_.contains(path_text.substr(0, dot)))
        raw_[path_text.substr(0, dot)].erase(path_text.substr(dot + 1));
    } else {
      apply_override(raw_, path_text + "=" + text.toStdString());
    }
    if (auto* f = field(path)) f->set_error({});
    return path_text.size() > 5 && path_text.compare(path_text.size() - 5, 5, ".name") == 0;
  } catch (const ConfigError& e) {
    field_errors_[path] = QString::fromStdString(e.problem());
    if (auto* f = field(path)) f->set_error(field_errors_[path]);
    return false;
  }
}

QStringList ConfigForm::axis_paths() const {
  QStringList out;
  for (const auto& path : order_) {
    if (path == kScriptArguments) continue;
    if (path != kScriptOptions) {
      out << path;
      continue;
    }
    if (const auto script = raw_.find("script"); script != raw_.end() && script->is_object())
      if (const auto args = script->find("args"); args != script->end() && args->is_object())
        for (const auto& item : args->items()) out << QString::fromStdString("script.args." + item.key());
  }
  return out;
}

void ConfigForm::set_text(const QString& path, const QString& text) {
  const bool reselected = apply(path, text);
  if (reselected) {
    rebuild();
  } else if (auto* f = field(path)) {
    f->show_text(text);
  }
  revalidate();
}

void ConfigForm::set_raw(const nlohmann::json& raw) {
  const auto parsed = RunConfig::parse(raw);  // throws before anything changes
  job_world_size(parsed);
  raw_ = raw;
  field_errors_.clear();
  rebuild();
}

void ConfigForm::revalidate() {
  if (!config_error_field_.isEmpty() && !field_errors_.count(config_error_field_))
    if (auto* f = field(config_error_field_)) f->set_error({});
  config_error_field_.clear();
  QString problem;
  if (!field_errors_.empty()) {
    const auto& [path, message] = *field_errors_.begin();
    problem = path + ": " + message;
  } else {
    try {
      // As run_job checks it: the engine answers once per section, a script's Python once.
      check_job(RunConfig::parse(raw_));
    } catch (const ConfigError& e) {
      problem = QString::fromUtf8(e.what());
      config_error_field_ = QString::fromStdString(e.field());
      if (auto* f = field(config_error_field_)) f->set_error(QString::fromStdString(e.problem()));
    } catch (const std::exception& e) {
      problem = QString::fromUtf8(e.what());
    }
  }
  problem_ = problem;
  Q_EMIT changed();
}

}  // namespace commtune::ui

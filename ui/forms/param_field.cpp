#include "ui/forms/param_field.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSignalBlocker>
#include <cmath>
#include <map>
#include <set>

namespace commtune::ui {

QString value_text(const nlohmann::json& value) {
  if (value.is_null()) return {};
  if (value.is_string()) return QString::fromStdString(value.get<std::string>());
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_float()) return QString::number(value.get<double>(), 'g', 12);
  return QString::fromStdString(value.dump());
}

std::optional<double> finite_number(const QString& text) {
  bool ok = false;
  const double value = text.toDouble(&ok);
  return ok && std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
}

QVariant sort_key(const QString& text) {
  const auto number = finite_number(text);
  return number ? QVariant(*number) : QVariant(text);
}

std::vector<QString> short_value_labels(const std::vector<QString>& values) {
  // Numbers with as few significant digits as keep them apart (0.0447, not 0.04472135955).
  for (int digits = 3; digits <= 12; ++digits) {
    std::vector<QString> out;
    std::set<QString> seen;
    for (const auto& v : values) {
      const auto number = finite_number(v);
      out.push_back(number ? QString::number(*number, 'g', digits) : v);
      seen.insert(out.back());
    }
    if (seen.size() == std::set<QString>(values.begin(), values.end()).size()) return out;
  }
  return values;
}

QString short_param_name(const QString& path) {
  static const std::map<QString, QString> known{{"matrix_approximation_rank", "rank"},
                                                {"start_powerSGD_iter", "start iter"},
                                                {"use_error_feedback", "error feedback"},
                                                {"min_compression_rate", "min rate"},
                                                {"orthogonalization_epsilon", "ortho eps"},
                                                {"byteps_compressor_type", "compressor"},
                                                {"byteps_compressor_k", "k"},
                                                {"byteps_ef_type", "error feedback"},
                                                {"byteps_momentum_type", "momentum"},
                                                {"byteps_momentum_mu", "mu"}};
  const auto name = path.mid(path.lastIndexOf('.') + 1);
  const auto it = known.find(name);
  return it != known.end() ? it->second : name;
}

ParamField::ParamField(ParamSpec spec, QString path, QWidget* parent)
    : QWidget(parent), spec_(std::move(spec)), path_(std::move(path)) {
  setObjectName("field:" + path_);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  switch (spec_.kind) {
    case ParamKind::Boolean:
      check_ = new QCheckBox(this);
      layout->addWidget(check_);
      connect(check_, &QCheckBox::toggled, this, [this] { Q_EMIT edited(path_, text()); });
      break;
    case ParamKind::Choice:
      choice_ = new QComboBox(this);
      for (const auto& c : spec_.choices) choice_->addItem(QString::fromStdString(c));
      layout->addWidget(choice_, 1);
      connect(choice_, &QComboBox::currentTextChanged, this, [this] { Q_EMIT edited(path_, text()); });
      break;
    default:
      line_ = new QLineEdit(this);
      line_->setPlaceholderText(value_text(spec_.default_value));
      layout->addWidget(line_, 1);
      connect(line_, &QLineEdit::textChanged, this, [this] { Q_EMIT edited(path_, text()); });
      break;
  }
  if (!spec_.unit.empty()) layout->addWidget(new QLabel(QString::fromStdString(spec_.unit), this));
  set_value(nullptr);
  update_tooltip();
}

QString ParamField::text() const {
  if (check_) return check_->isChecked() ? "true" : "false";
  if (choice_) return choice_->currentText();
  return line_->text();
}

void ParamField::set_value(const nlohmann::json& value) {
  show_text(value_text(value.is_null() ? spec_.default_value : value));
}

void ParamField::show_text(const QString& text) {
  if (check_) {
    QSignalBlocker block(check_);
    check_->setChecked(text == "true" || text == "1");
  } else if (choice_) {
    QSignalBlocker block(choice_);
    choice_->setCurrentText(text);
  } else {
    QSignalBlocker block(line_);
    line_->setText(text);
  }
}

void ParamField::set_error(const QString& message) {
  if (message == error_) return;
  error_ = message;
  QWidget* editor = check_ ? static_cast<QWidget*>(check_) : choice_ ? static_cast<QWidget*>(choice_) : line_;
  editor->setStyleSheet(error_.isEmpty() ? QString() : QString("border: 2px solid #d9534f; border-radius: 3px;"));
  update_tooltip();
}

void ParamField::update_tooltip() {
  QString tip = "<b>" + path_.toHtmlEscaped() + "</b><br>" + QString::fromStdString(spec_.doc).toHtmlEscaped() +
                "<br><i>" + QString::fromStdString(spec_.allowed()).toHtmlEscaped() + "; default " +
                value_text(spec_.default_value).toHtmlEscaped() + "</i>";
  if (!error_.isEmpty()) tip += "<br><span style='color:#d9534f'>" + error_.toHtmlEscaped() + "</span>";
  setToolTip(tip);
  for (auto* child : findChildren<QWidget*>()) child->setToolTip(tip);
}

}  // namespace commtune::ui

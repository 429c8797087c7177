// One parameter's editor, made from its declaration in the parameter schema:
// a check box, a choice list, or a line edit for numbers and text, with the
// unit beside it and the doc, allowed values and default in its tooltip.
// It reports edits as text; whoever owns the configuration checks them with
// the engine's own parser, so the GUI and the CLI accept the same values and
// say the same thing about the rest.
#pragma once

#include <QString>
#include <QVariant>
#include <optional>
#include <vector>
#include <QWidget>
#include <nlohmann/json.hpp>

#include "core/tuner/schema/param_schema.h"

class QCheckBox;
class QComboBox;
class QLineEdit;

namespace commtune::ui {

class ParamField : public QWidget {
  Q_OBJECT
 public:
  // `path`: the dotted name the configuration knows it by (hook.matrix_approximation_rank).
  ParamField(ParamSpec spec, QString path, QWidget* parent = nullptr);

  const ParamSpec& spec() const { return spec_; }
  const QString& path() const { return path_; }
  QString text() const;
  // Shows `value` (the default when null) without reporting an edit.
  void set_value(const nlohmann::json& value);
  // Shows `text` as if typed, without reporting an edit.
  void show_text(const QString& text);
  // Marks the field as refused, with the reason as its tooltip; "" clears.
  void set_error(const QString& message);
  bool has_error() const { return !error_.isEmpty(); }
  const QString& error() const { return error_; }

 Q_SIGNALS:
  void edited(const QString& path, const QString& text);

 private:
  void update_tooltip();

  ParamSpec spec_;
  QString path_;
  QString error_;
  QCheckBox* check_ = nullptr;
  QComboBox* choice_ = nullptr;
  QLineEdit* line_ = nullptr;
};

// "1e-05" rather than "1.0000000000000001e-05": how a value reads in a field.
QString value_text(const nlohmann::json& value);

// A value's text read as a finite number ("4", "0.05"); nullopt for text,
// and for nan and inf, which tables and filters treat as words.
std::optional<double> finite_number(const QString& text);
// What a table sorts a value by: the number when the text is one, else the text.
QVariant sort_key(const QString& text);

// Tick labels for swept values: numbers to the fewest significant digits
// that keep them distinct (0.0447, not 0.04472135955), words as they are.
std::vector<QString> short_value_labels(const std::vector<QString>& values);

// A parameter's name short enough for a column header or a plot axis:
// hook.matrix_approximation_rank -> rank, optimizer.lr -> lr.
QString short_param_name(const QString& path);

}  // namespace commtune::ui

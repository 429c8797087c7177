// A run configuration as a form, generated from the parameter schema: one
// group per section, the section's entry (hook, model, ...) chosen from a
// list with its own parameters below. Every edit is checked as it is typed
// by the same parser as the CLI's --set; the whole configuration is checked
// as the launcher would, and the first problem names its field.
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>
#include <map>
#include <nlohmann/json.hpp>

class QVBoxLayout;

namespace commtune::ui {

class ParamField;

class ConfigForm : public QWidget {
  Q_OBJECT
 public:
  explicit ConfigForm(QWidget* parent = nullptr);

  // The configuration as edited: only what differs from the defaults.
  const nlohmann::json& raw() const { return raw_; }
  // Replaces the configuration. Throws ConfigError when it does not validate
  // (the form keeps what it had).
  void set_raw(const nlohmann::json& raw);
  // Sets a field as typing would (tests, loading).
  void set_text(const QString& path, const QString& text);
  ParamField* field(const QString& path) const;
  // Every parameter shown, in form order.
  QStringList paths() const { return order_; }
  // The parameters a sweep can vary: those, with the script's named options
  // (one line of the form) as one script.args.NAME each and its arguments left out.
  QStringList axis_paths() const;
  // The first problem of the whole configuration, "" when it can run.
  QString problem() const { return problem_; }

 Q_SIGNALS:
  void changed();

 private:
  void rebuild();
  // Applies one edit to raw_; true when it selected another entry (the form must be rebuilt).
  bool apply(const QString& path, const QString& text);
  void revalidate();

  nlohmann::json schema_;
  nlohmann::json raw_ = nlohmann::json::object();
  std::map<QString, ParamField*> fields_;
  std::map<QString, QString> field_errors_;
  QStringList order_;
  QString config_error_field_;
  QString problem_;
  QVBoxLayout* groups_;
  QWidget* content_ = nullptr;
};

}  // namespace commtune::ui

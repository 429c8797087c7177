// Where runs and sweeps start: the configuration form on the left, a single
// run or a sweep on the right, and the first problem (naming its field)
// under them. Launch buttons stay disabled until the configuration is valid.
#pragma once

#include <QWidget>
#include <nlohmann/json.hpp>
#include <string>

class QLabel;
class QLineEdit;
class QPushButton;
class QTabWidget;

namespace commtune::ui {

class ConfigForm;
class SweepEditor;

class LaunchPage : public QWidget {
  Q_OBJECT
 public:
  explicit LaunchPage(QWidget* parent = nullptr);

  ConfigForm* form() const { return form_; }
  SweepEditor* sweep() const { return sweep_; }
  QPushButton* run_button() const { return run_; }
  QPushButton* sweep_button() const { return start_sweep_; }
  QString problem_text() const;
  void set_engine_busy(bool busy);

  // A run configuration or a sweep spec (told apart by its "axes").
  void load_json(const nlohmann::json& json);
  nlohmann::json current_json() const;  // the sweep spec while the sweep tab is shown
  void show_sweep(bool sweep);

 Q_SIGNALS:
  void run_requested(const nlohmann::json& config, const QString& name);
  void sweep_requested(const nlohmann::json& spec);

 private:
  void update_state();
  // Why the form's single run would train as plain allreduce ("" when its hook acts).
  std::string single_run_warning() const;

  ConfigForm* form_;
  SweepEditor* sweep_;
  QTabWidget* mode_;
  QLineEdit* run_name_;
  QPushButton* run_;
  QPushButton* start_sweep_;
  QLabel* problem_;
  bool busy_ = false;
};

}  // namespace commtune::ui

// A sweep as a form: the run form's configuration is the base; axes are
// added from the same parameters (a list of values, or a range with a number
// of points and a log scale), and the sweep's own options (search strategy,
// baseline, parallel trials, successive halving) come from their schema.
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>
#include <map>
#include <nlohmann/json.hpp>

class QTableWidget;
class QLabel;
class QFormLayout;

namespace commtune::ui {

class ConfigForm;
class ParamField;

class SweepEditor : public QWidget {
  Q_OBJECT
 public:
  SweepEditor(ConfigForm* base, QWidget* parent = nullptr);

  // The sweep spec (docs/sweeps.md) with the base form's configuration.
  nlohmann::json spec() const;
  // Takes axes and options from a spec (its base goes to the base form by the caller).
  void set_spec(const nlohmann::json& spec);
  // Adds an axis: values as "1, 2, 4" or a range "0.01 .. 0.1".
  // Without a parameter, the first of lr, the hook's own and the rest that is not an axis yet.
  void add_axis(const QString& param = {}, const QString& values = {}, int points = 0, bool log = false);
  QStringList axis_params() const;
  void set_option(const QString& path, const QString& text);
  // "" and the number of trials when the sweep can run, else the first problem.
  QString problem() const { return problem_; }
  int trials() const { return trials_; }

 Q_SIGNALS:
  void changed();

 private:
  void revalidate();
  void show_chosen_options();  // the strategy's and the backend's own fields, not the others'
  QString next_axis_param() const;
  nlohmann::json axes_json() const;  // throws ConfigError naming the axis

  ConfigForm* base_;
  QTableWidget* axes_;
  std::map<QString, ParamField*> options_;
  QFormLayout* options_form_;
  nlohmann::json option_values_ = nlohmann::json::object();
  QString problem_;
  int trials_ = 0;
};

}  // namespace commtune::ui

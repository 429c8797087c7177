// The Runs page's comparison of the opened runs, core/tuner/verdict/
// run_comparison.h's as `commtune-cli compare` prints it: the parameters in
// a row each and the runs in a column each, those that differ first and in
// bold (or only those), and a metrics table with a row per run (its tail
// loss, its change against its own baseline, ms and MB per step,
// compression ratio; a baseline's id is starred).
#pragma once

#include "core/tuner/verdict/run_comparison.h"

class QTableWidget;

namespace commtune::ui {

class RunComparisonView {
 public:
  RunComparisonView(QTableWidget* diff, QTableWidget* metrics);
  // `only_differences`: the parameters that differ, when there are runs to differ.
  void draw(const RunComparison& comparison, bool only_differences);
  void clear();

 private:
  void draw_diff(const RunComparison& comparison, bool only_differences);
  void draw_metrics(const RunComparison& comparison);

  QTableWidget* diff_;
  QTableWidget* metrics_;
};

}  // namespace commtune::ui

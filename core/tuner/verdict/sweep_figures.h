// Figures of an analysed sweep (core/tuner/verdict/sweep_analysis.h) that the
// Analysis page draws and tests check without a window, as optuna-dashboard
// and W&B show them: the optimization history (each trial's tail loss in the
// order the trials ran, and the best so far), the empirical distribution of
// the tail loss, the sign of each swept parameter's effect, the allreduce
// baseline a slice is read against, and the scatter-plot matrix of the swept
// parameters against the tail loss and the step time.
// Allreduce baselines are the reference, not trials of the search: left out
// of every figure but as the baseline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tuner/verdict/sweep_analysis.h"

namespace commtune {

// The trials in the order they ran (by run id) and the best tail loss so far.
struct HistoryPoint {
  std::int64_t run_id = 0;
  std::int64_t trial = 0;  // its number in the sweep (baselines counted, as list and show number them); for
                           // the runs of several sweeps, its place in the order they ran
  double loss = 0;               // its tail loss (not finite: diverged)
  std::optional<double> best;    // the lowest finite tail loss among the trials up to this one
  bool improved = false;         // this trial set a new best
};
struct OptimizationHistory {
  std::vector<HistoryPoint> trials;
  std::optional<double> baseline_loss;  // the allreduce baselines' mean tail loss, for reference
  int diverged = 0;
};
OptimizationHistory optimization_history(const SweepAnalysis& analysis);

// The empirical distribution function of the trials' tail loss: the share of
// trials whose loss is at most x, a step at each finite loss. Diverged trials
// count in the total and never in a step, so the curve ends below 1 with them.
struct EmpiricalDistribution {
  std::vector<double> losses;     // the finite losses, ascending
  std::vector<double> fractions;  // after each: the share of all trials at or below it
  int trials = 0;                 // every trial, diverged ones included
  int diverged = 0;
  // The share of trials at or below `loss`.
  double at(double loss) const;
};
EmpiricalDistribution empirical_distribution(const SweepAnalysis& analysis);

// How the tail loss moves with a numeric swept parameter: Spearman's rank
// correlation over the finite trials that have it (ties ranked by their
// mean rank). No sign for a parameter of words, one value, or fewer than 3 trials.
struct ParamCorrelation {
  std::string param;
  std::optional<double> rho;  // in [-1, 1]: > 0, the loss rises with the parameter
  int trials = 0;
  // "+" (the loss rises with it), "−" (falls) or "" (no sign to give).
  std::string sign() const;
};
std::vector<ParamCorrelation> loss_correlations(const SweepAnalysis& analysis);

// The allreduce baseline against a slice over `param`: at each of its values
// when the baselines were run at them (a baseline per learning rate), else
// one level (their mean) when the baselines do not have the parameter.
struct SliceBaseline {
  std::optional<double> level;
  std::vector<std::pair<std::string, double>> at_values;  // value -> the baselines' mean tail loss there
  int runs = 0;
  bool empty() const { return !level && at_values.empty(); }
};
SliceBaseline slice_baseline(const SweepAnalysis& analysis, const std::string& param);

// The scatter-plot matrix: a column per swept parameter, a row per result
// (the tail loss, the measured ms per step), a point per trial in each panel
// where the trial has both. A parameter of words places its values at their
// index, in order; numbers spanning more than two decades go on a log scale.
struct ScatterColumn {
  std::string param;
  bool numeric = true;
  bool log = false;
  std::vector<std::string> categories;  // a parameter of words: its values in order
};
struct ScatterTrial {
  std::int64_t run_id = 0;
  std::vector<std::optional<double>> x;  // per column: its place (nothing: the trial lacks the parameter)
  std::vector<std::optional<double>> y;  // per row: the tail loss (finite), the ms per step
};
struct ScatterMatrix {
  std::vector<ScatterColumn> columns;
  std::vector<std::string> rows;  // "tail loss", "ms/step"
  std::vector<ScatterTrial> trials;
};
ScatterMatrix scatter_matrix(const SweepAnalysis& analysis);

}  // namespace commtune

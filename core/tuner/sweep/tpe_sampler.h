// A search that learns from the trials so far: the tree-structured Parzen
// estimator (TPE, Bergstra et al. 2011), univariate, with Optuna's documented
// defaults, and its multi-objective form (MOTPE, Ozaki et al. 2020).
//
// The finished trials are split into a good few, l(x), and the rest, g(x):
// gamma(n) = min(ceil(0.1 n), 25) of them are good. Each parameter gets a
// Parzen estimator per side: a truncated Gaussian mixture over [0, 1] (a
// range axis, as a fraction of it, log-scaled when the axis is) or weighted
// category counts (a listed axis), each with a prior component of weight 1;
// bandwidths are the distances to the neighbours, clipped to
// [1 / min(100, 1 + n), 1] ("magic clip"); older trials weigh less once there
// are more than 25. The next point maximises l(x) / g(x) over 24 candidates
// drawn from l. The first 10 trials are drawn uniformly, as random search.
//
// With successive halving a trial counts at the furthest rung it reached:
// trials that went further rank first, then by value at that rung (Optuna
// ranks pruned trials the same way). With two objectives the good trials are
// the first non-dominated fronts; the front that does not fit is cut greedily
// by hypervolume contribution.
//
// Plain data in, one point out: the sweep runner keeps the observations.
#pragma once

#include <cstdint>
#include <vector>

namespace commtune {

struct TpeDimension {
  std::size_t choices = 0;  // a listed axis: an index below `choices`; 0: a range, a fraction of it in [0, 1]
};

struct TpeObservation {
  std::vector<double> position;  // per dimension; NaN where the trial lacks the parameter
  std::vector<double> values;    // the objectives, lower is better (inf: diverged)
  int rung = 0;                  // the furthest successive-halving rung it finished
};

struct TpeOptions {
  std::int64_t startup_trials = 10;  // drawn uniformly before the model is used
  std::int64_t candidates = 24;      // drawn from l(x) per parameter
  std::int64_t seed = 0;
};

// The position of trial number `trial`, given the finished trials in the
// order they were numbered. The same history, trial and seed give the same
// point on every platform.
std::vector<double> tpe_sample(const std::vector<TpeDimension>& dimensions,
                               const std::vector<TpeObservation>& history, std::int64_t trial,
                               const TpeOptions& options);

// Which of `history` TPE counts as good (indices, in history order). Exposed
// for tests of the split.
std::vector<std::size_t> tpe_good_trials(const std::vector<TpeObservation>& history);

}  // namespace commtune

// Which swept parameters the objective depends on: a variance split over
// the finished trials (the main effects of a functional ANOVA, as fANOVA
// reports them, estimated from the trials themselves rather than from a
// fitted forest). For each parameter, trials are grouped by its value
// (numbers with many distinct values into up to kMaxGroups quantile bins)
// and the share of the objective's variance explained by the group means,
// SS_between / SS_total, is its importance. Shares need not sum to 1: what
// is left is interactions and noise. No Qt and no torch: the desktop app and
// tests share it.
#pragma once

#include <string>
#include <vector>

namespace commtune {

struct Trial {
  std::vector<std::string> values;  // one per parameter, as text ("4", "true", "powersgd")
  double objective = 0;             // non-finite trials are left out
};

struct Importance {
  std::string param;
  double share = 0;  // in [0, 1]
  int groups = 0;    // distinct values (or bins) it was split into
};

inline constexpr int kMaxGroups = 5;

// Sorted by share, largest first. Needs at least 3 finite trials.
std::vector<Importance> parameter_importance(const std::vector<std::string>& params, const std::vector<Trial>& trials);

}  // namespace commtune

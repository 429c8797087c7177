// Which swept parameters the objective depends on: the objective's variance
// over the finished trials, split into one share per parameter plus the part
// no single parameter explains (interactions) and the part no parameter can
// explain (repeated configurations that scored differently, e.g. seeds).
//
// Why one decomposition: a separate one-way ANOVA per parameter counts the
// same variance several times as soon as the design is unbalanced or
// conditional (a PowerSGD rank that only PowerSGD trials have also "explains"
// every difference between PowerSGD and the other hooks), and the shares then
// summed to 145-170%. Here every share is a piece of one additive split of the
// total variance, so the shares sum to 1 and can be read as percentages.
//
// How: trials are first grouped by which parameters they have (a conditional
// parameter of another hook is absent, ""); by the law of total variance the
// variance between those groups is a hook choice, credited to the `.name`
// axis that tells them apart, and each group's own variance is decomposed over
// the parameters that vary inside it. A group whose trials cover every
// combination of its parameters' levels gets the exact functional ANOVA of
// that grid (levels weighted equally, replicates giving the noise term);
// anything else (random search, a partial grid) gets fANOVA on a random
// forest, as Optuna's FanovaImportanceEvaluator computes it, because the
// trials alone do not pin down marginals there. The forest is seeded, so the
// same trials always give the same shares. No Qt and no torch: the desktop
// app and the tests share it.
#pragma once

#include <string>
#include <vector>

namespace commtune {

struct Trial {
  std::vector<std::string> values;  // one per parameter, as text ("4", "true", "powersgd"); "" = the trial lacks it
  double objective = 0;             // non-finite trials are left out
};

struct Importance {
  enum class Kind { Parameter, Interactions, Noise };
  std::string param;  // a parameter, kInteractions or kNoise
  double share = 0;   // in [0, 1]; the shares of one result sum to 1
  int groups = 0;     // distinct values the parameter took among finite trials (0 for the residual entries)
  Kind kind = Kind::Parameter;
};

inline constexpr const char* kInteractions = "interactions";
inline constexpr const char* kNoise = "noise (repeated configurations)";
inline constexpr int kForestTrees = 64;

struct ImportanceResult {
  // Every parameter, largest share first (ties in the order of `params`);
  // then "interactions", present when some decomposition had two or more
  // parameters varying together (so that interactions could exist); then
  // "noise", present when some exact grid had a configuration run more than
  // once. A residual entry that is present may have share 0. Empty when there
  // is nothing to split (fewer than 3 finite trials, or no variance).
  std::vector<Importance> shares;
  std::string method;  // one sentence for the view: which decomposition, and how absent parameters were handled
};

// The variance between groups of trials that have different parameters goes
// to the first `.name` axis (in `params` order) whose values differ between
// those groups; with none, to the first parameter that some groups lack.
// Throws std::invalid_argument when a trial does not have one value per parameter.
ImportanceResult parameter_importance(const std::vector<std::string>& params, const std::vector<Trial>& trials);

}  // namespace commtune

// The recommendation: among runs of the same model and data, the
// configuration whose loss stays within a tolerance of the allreduce
// baseline and whose predicted step time on the target cluster is best; or,
// honestly, "keep allreduce" when nothing beats it by a margin the model can
// tell apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/netmodel/cost_model.h"
#include "db/store.h"

namespace commtune {

struct RecommendOptions {
  net::Cluster cluster;
  TargetCompute compute;  // the target's compute (default: each run's own)
  double tolerance = 0.01;                   // relative: a loss at most (1 + tolerance) x the baseline's
  double min_speedup = 1.05;                 // predicted gains below 5% are within the model's error
  std::optional<std::int64_t> baseline_run;  // default: the allreduce run among the candidates
};

struct Candidate {
  std::int64_t run_id = 0;
  std::string label;                  // the run's name, or its hook
  std::string hook;                   // hook name (+ wrapper)
  std::optional<double> loss;         // tail_loss
  std::optional<double> loss_change;  // relative to the baseline's
  bool within_tolerance = false;
  std::string excluded;  // why it cannot be recommended ("" when it can)
  std::optional<StepPrediction> prediction;
  std::optional<double> speedup;  // baseline's predicted step / this one's
};

struct Recommendation {
  net::Cluster cluster;
  std::string compute;  // which compute the predictions assumed (TargetCompute::describe)
  double tolerance = 0;
  std::int64_t baseline_run = 0;
  std::vector<Candidate> candidates;       // fastest predicted first
  std::optional<std::int64_t> chosen_run;  // null: keep allreduce
  std::string verdict;                     // one sentence for humans

  nlohmann::json to_json() const;
};

// Throws db::Error when no baseline can be found or it cannot be profiled.
Recommendation recommend(const db::Store& store, const std::vector<std::int64_t>& run_ids,
                         const RecommendOptions& options);

// The run among `run_ids` that plain allreduce trained (hook allreduce or
// none, no wrapper), preferring the one with most steps; nullopt if none.
std::optional<std::int64_t> find_allreduce_baseline(const db::Store& store, const std::vector<std::int64_t>& run_ids);

// "powersgd (fp16 wrapper)" and the like.
std::string describe_hook(const nlohmann::json& config);

}  // namespace commtune

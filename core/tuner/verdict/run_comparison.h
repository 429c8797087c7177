// Runs side by side, as `commtune-cli compare` prints them and the Runs page
// draws them: computed once here, so the two cannot disagree.
//
// - Each run is compared with its own fair baseline (Evidence's: the plain
//   allreduce configuration with the same settings outside the hook), the
//   run of it with the same seed, else its first; never one baseline for all
//   (a learning-rate sweep has a baseline per learning rate). A baseline
//   named by the caller replaces them all.
// - The differing parameters are those the runs disagree on, or that only
//   some of them have (PowerSGD's rank sets it apart from allreduce); the
//   bookkeeping (checkpoint.*, debug.*) never counts as a difference.
// - Configurations run with several seeds get their mean, spread and loss
//   change against their baseline with its interval (LossChange).
//
// No Qt: the CLI prints this, the Runs page draws it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/store/run_metrics.h"
#include "core/tuner/verdict/pareto.h"
#include "db/store.h"

namespace commtune {

struct ComparedRun {
  db::RunRecord run;
  std::string label;                             // run_label()
  std::map<std::string, nlohmann::json> params;  // its values of the differing parameters (run_params())
  RunDigest digest;
  std::optional<std::int64_t> baseline_run;  // its fair baseline's run
  bool is_baseline = false;                  // it is its own baseline (a plain allreduce run)
  std::optional<double> loss_change;         // tail loss / its baseline's - 1, when both are finite
  std::string no_loss_change;                // why loss_change is missing ("" for a baseline or when it is there)
};

struct RunComparison {
  std::vector<ComparedRun> runs;       // in the order asked for
  std::vector<std::string> differing;  // parameter names, sorted
  nlohmann::json configurations = nlohmann::json::array();  // replicated ones: runs, label, seeds, mean, sd, change
  std::optional<std::int64_t> baseline_run;  // the one named, else the first baseline among the runs
  bool any_baseline = false;                 // some run is its own baseline
  // Tail loss against MB on the wire per step, one point per configuration
  // (core/tuner/verdict/pareto.h): the Analysis page's Pareto plot by bytes.
  std::vector<ParetoPoint> pareto_by_wire;
};

// Throws std::invalid_argument when `baseline` names no stored run.
RunComparison compare_runs(const db::Store& store, const std::vector<std::int64_t>& ids,
                           std::optional<std::int64_t> baseline = std::nullopt);

// A parameter's value as a person reads it: six significant digits for a
// real (0.1, not 0.10000000000000002), strings as they are, "-" for none.
std::string param_text(const nlohmann::json& value);

}  // namespace commtune

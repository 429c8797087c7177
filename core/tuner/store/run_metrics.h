// The figures every view shows of a run, defined once here and named the
// same in the CLI, the GUI and the summaries:
//   last loss   the loss of the last step every rank finished, averaged over
//               ranks (the store's final_loss);
//   tail loss   the mean of that over the last 10% of the steps (tail_loss):
//               what trials are compared and ranked by;
//   ms/step     the median, over the steady steps, of each step's time
//               averaged over ranks;
//   MB/step     the mean bytes on the wire per step and rank over the steady
//               steps; compression ratio: uncompressed bytes / wire bytes.
// The steady steps are a run's second half: past DDP's bucket rebuild, the
// warm-up, and a start iteration such as PowerSGD's.
// A NaN or infinite loss makes the tail loss infinite: the worst, never a tie.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"

namespace commtune {

// "nan", "inf" or "-inf" for a value that is not finite.
std::string nonfinite_name(double value);
// A figure as JSON: null when absent, the number when finite, else its
// nonfinite_name (JSON has no NaN; null would read as "no value").
nlohmann::json figure_json(const std::optional<double>& value);
// figure_json's inverse: nullopt for anything else.
std::optional<double> figure_from_json(const nlohmann::json& value);

// The statuses of runs whose stored steps measure what they ran, which every
// analysis reads (predict, the Analysis page): ended without a failure
// (succeeded; stopped by the user or by successive halving; paused at a
// rung) or diverged (its steps up to the divergence were measured).
const std::vector<std::string>& measured_statuses();
bool is_measured(const std::string& status);

// Index of the first steady step among `count` steps.
// Runs store profiles of their steady steps (RunSamples::kStoredFormat): a
// change here bumps that format.
std::size_t first_steady_index(std::size_t count);

// The median (the mean of the two middle values for an even count); NaN when empty.
double median(std::vector<double> values);

// The tail loss at `step` (default: the last): the mean loss over ranks and
// over the last 10% of the steps up to it (at least 1, at most 50 steps).
// A single step's loss is too noisy to rank trials by. nullopt without data;
// infinity when a loss in the window is not finite; nullopt too when a step
// in the window has no stored loss (a missing value is not averaged away).
std::optional<double> tail_loss(const std::vector<db::CurvePoint>& curve,
                                std::optional<std::int64_t> step = std::nullopt);

// Steps in tail_loss's window when a run has `steps` steps.
std::int64_t tail_window(std::int64_t steps);

// What a comparison shows of a run, from its stored steps. A figure is
// nullopt when a step it spans has no value for it in the store.
struct RunDigest {
  std::optional<double> last_loss;
  std::optional<double> loss;  // tail loss
  std::optional<double> step_ms;
  std::optional<double> wire_mb;
  std::optional<double> compression_ratio;
  std::int64_t steps = 0;  // steps every reporting rank finished
};
RunDigest digest_curve(const std::vector<db::CurvePoint>& curve);
// A run's digest: the one stored when it ended (RunRecord::digest), else
// computed from its steps (a run still running, or one that ended before
// the store kept digests).
RunDigest digest_run(const db::Store& store, const db::RunRecord& run);
RunDigest digest_run(const db::Store& store, std::int64_t run_id);
// The digest an ended run stored, read without the store (safe on any
// thread); nullopt for a run that must be digested from its steps.
std::optional<RunDigest> stored_digest(const db::RunRecord& run);

// The digest as `show`, `compare --json` and the store hold it; nullopt
// for JSON that is not one (a damaged or hand-edited store).
nlohmann::json digest_json(const RunDigest& digest);
std::optional<RunDigest> digest_from_json(const nlohmann::json& json);

}  // namespace commtune

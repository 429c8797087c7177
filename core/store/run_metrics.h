// Numbers derived from a stored run that sweeps, comparisons and
// recommendations agree on.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "db/store.h"

namespace commtune {

// The run's quality at `step` (default: its last): the mean loss over ranks
// and over the last 10% of the steps up to it (at least 1, at most 50 steps).
// A single step's loss is too noisy to rank trials by. nullopt without data.
std::optional<double> tail_loss(const std::vector<db::CurvePoint>& curve,
                                std::optional<std::int64_t> step = std::nullopt);

// Steps in tail_loss's window when a run has `steps` steps.
std::int64_t tail_window(std::int64_t steps);

// What a comparison shows of a run, from its stored steps: tail_loss, the
// median step time and mean bytes on the wire over the steady second half,
// and the compression ratio (uncompressed / wire bytes).
struct RunDigest {
  std::optional<double> loss;
  std::optional<double> step_ms;
  std::optional<double> wire_mb;
  std::optional<double> compression_ratio;
  std::int64_t steps = 0;  // steps every reporting rank finished
};
RunDigest digest_run(const db::Store& store, std::int64_t run_id);

}  // namespace commtune

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

}  // namespace commtune

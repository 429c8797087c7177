// When a configured hook starts to change what goes on the wire, and whether
// it ever does for a model: PowerSGD and post-local SGD run plain allreduce
// until their start iteration; a compressor leaves buckets under its minimum
// size alone; PowerSGD leaves matrices it cannot shrink. A sweep whose
// trials would never compress compares allreduce with allreduce, and a
// verdict over steps before the hook switched on measures nothing of it: the
// plan guard (core/sweep/sweep_spec.h) and the verdicts (core/verdict/) ask here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

struct HookActivity {
  std::int64_t first_active_step = 0;  // steps before it are plain allreduce
  std::string start_field;             // the parameter that sets it (hook.start_powerSGD_iter), "" from the start
};

// For a run's whole (validated) configuration.
HookActivity hook_activity(const nlohmann::json& run_config);

// For a single run: what to warn about when its hook would not act within
// its steps ("" when it would): "hook.start_powerSGD_iter is 1000, not below
// steps (60): this run's hook never acts; it trains as plain allreduce".
std::string hook_inactivity_warning(const nlohmann::json& run_config);

// Why the hook would send every bucket uncompressed for a model with these
// parameter shapes (in the model's order), as "field: problem"; "" when it
// compresses some. Buckets are laid out as DDP does after its rebuild
// (gradients ready in reverse parameter order, the first bucket capped at
// ddp.first_bucket_cap_mb).
struct SizeProblem {
  std::string field;
  std::string problem;
  explicit operator bool() const { return !problem.empty(); }
};
SizeProblem hook_size_problem(const nlohmann::json& run_config, const std::vector<std::vector<std::int64_t>>& shapes);

}  // namespace commtune

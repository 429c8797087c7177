// When a configured hook starts to change what goes on the wire, and whether
// it ever does: PowerSGD and post-local SGD run plain allreduce
// until their start iteration; a compressor leaves buckets under its minimum
// size alone; PowerSGD leaves matrices it cannot shrink. A sweep whose
// trials would never compress compares allreduce with allreduce, and a
// verdict over steps before the hook switched on measures nothing of it: the
// plan guard (core/tuner/sweep/sweep_spec.h) and the verdicts (core/tuner/verdict/) ask here,
// and the engine for what needs the model (core/engine/hooks/hook_size.h).
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

}  // namespace commtune

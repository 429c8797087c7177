// Export of a tuned PowerSGD configuration for a production PyTorch job: a
// PowerSGDState file that plain PyTorch loads (torch.load(path,
// weights_only=True), 1.13 and 2.x), the run's configuration, and a Python
// snippet that registers the hook with a DDP model. The state file holds
// tensors, so the engine writes it all (core/engine/export/powersgd_export.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

// Writes into out_dir: powersgd_state.pt (hyperparameters), or with a
// checkpoint folder one powersgd_state-rank<R>.pt per rank carrying that
// rank's runtime state as well (iteration, random generator, per-bucket
// error and P/Q memories); commtune_config.json; use_powersgd.py.
// `config` is a run's configuration; throws ConfigError when its hook is not
// PowerSGD, std::runtime_error with the engine's reason when it cannot
// write. Returns the files written.
std::vector<std::string> export_powersgd(const nlohmann::json& config, const std::string& checkpoint_folder,
                                         const std::string& out_dir);

// The worker's side of the request (`commtune-worker --export-powersgd FILE`).
inline constexpr const char* kExportPowerSgdFlag = "--export-powersgd";

}  // namespace commtune

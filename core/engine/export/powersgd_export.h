// The engine's side of the PowerSGD export (the tuner asks for it through
// `commtune-worker --export-powersgd`, core/tuner/export/powersgd_export.h): a
// PowerSGDState file that plain PyTorch loads (torch.load(path,
// weights_only=True), 1.13 and 2.x), the run's configuration, and a Python
// snippet that registers the hook with a DDP model.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

inline constexpr const char* kPowerSgdStateFormat = "commtune.powersgd_state";
inline constexpr std::int64_t kPowerSgdStateVersion = 1;

// Writes into out_dir: powersgd_state.pt (hyperparameters), or with a
// checkpoint folder one powersgd_state-rank<R>.pt per rank carrying that
// rank's runtime state as well (iteration, random generator, per-bucket
// error and P/Q memories); commtune_config.json; use_powersgd.py.
// `config` is a run's validated configuration. Returns the files written.
std::vector<std::string> write_powersgd_export(const nlohmann::json& config, const std::string& checkpoint_folder,
                                         const std::string& out_dir);

}  // namespace commtune

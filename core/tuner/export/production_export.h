// A tuned configuration in the form a production PyTorch job uses, whatever
// its hook: PowerSGD gets its PowerSGDState file (powersgd_export.h); the
// default hooks and their wrappers get the registration line; the byteps hook
// gets BytePS's MXNet compression_params (byteps_mxnet.py) and a PyTorch DDP
// hook that runs its algorithm (use_byteps.py). Every export
// has the run's configuration (commtune_config.json) and a ready-to-paste
// Python file.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

// `config`: a run's validated configuration; `checkpoint_folder` (may be
// empty): where to take a stateful hook's runtime state from. Returns the
// files written. Throws ConfigError for hooks that have no production form.
std::vector<std::string> export_for_production(const nlohmann::json& config, const std::string& checkpoint_folder,
                                               const std::string& out_dir);

}  // namespace commtune

#include "core/tuner/export/powersgd_export.h"

#include <filesystem>

#include "core/tuner/config/run_config.h"
#include "core/tuner/launch/worker_call.h"

namespace commtune {

std::vector<std::string> export_powersgd(const nlohmann::json& config, const std::string& checkpoint_folder,
                                         const std::string& out_dir) {
  const auto name = RunConfig::parse(config).hook.value("name", std::string());
  if (name != "powersgd" && name != "batched_powersgd")
    throw ConfigError("hook.name", "the run used hook '" + name + "', not powersgd or batched_powersgd");
  const auto absolute = [](const std::string& path) {
    return path.empty() ? path : std::filesystem::absolute(path).string();
  };
  const auto files = call_worker(kExportPowerSgdFlag, "write the PowerSGD state",
                                 {{"config", config}, {"checkpoint", absolute(checkpoint_folder)}, {"out", absolute(out_dir)}});
  return files.get<std::vector<std::string>>();
}

}  // namespace commtune

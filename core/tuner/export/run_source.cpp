#include "core/tuner/export/run_source.h"

#include <filesystem>
#include <stdexcept>

namespace commtune {

RunExportSource run_export_source(const db::Store& store, std::int64_t run_id) {
  const auto run = store.run(run_id);
  if (!run) throw std::runtime_error("there is no run " + std::to_string(run_id) + " in " + store.path());
  if (!run->config_problem.empty())
    throw std::runtime_error("run " + std::to_string(run_id) + " has no usable configuration: " + run->config_problem);
  RunExportSource out{*run, run->config, {}};
  std::error_code ignored;
  for (const auto& a : store.artifacts(run_id))
    if (a.kind == "checkpoint" && std::filesystem::is_directory(a.path, ignored)) out.checkpoint = a.path;
  return out;
}

}  // namespace commtune

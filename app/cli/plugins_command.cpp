// `plugins`: the folders plugins load from, and what each plugin added or
// why it was refused.
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/tuner/config/components.h"

namespace commtune::cli {
namespace {

int plugins_command(bool as_json) {
  const auto& engine = components();
  const auto& records = engine.plugins;
  if (as_json) {
    auto list = nlohmann::json::array();
    for (const auto& r : records)
      list.push_back(
          {{"path", r.path}, {"name", r.name}, {"loaded", r.loaded}, {"reason", r.reason}, {"added", r.added}});
    std::cout << nlohmann::json{{"folders", engine.plugin_folders}, {"sdk", engine.plugin_sdk}, {"plugins", list}}.dump(
                     2)
              << "\n";
    return kExitOk;
  }
  std::cout << "plugin folders (COMMTUNE_PLUGIN_PATH overrides them):\n";
  for (const auto& folder : engine.plugin_folders) std::cout << "  " << folder << "\n";
  std::cout << "plugin SDK: " << engine.plugin_sdk << "\n";
  if (records.empty()) std::cout << "no plugins found\n";
  for (const auto& r : records) {
    std::cout << (r.loaded ? "loaded   " : "refused  ") << r.path;
    if (!r.name.empty()) std::cout << " (" << r.name << ")";
    std::cout << "\n";
    if (!r.loaded) std::cout << "         " << r.reason << "\n";
    for (const auto& a : r.added) std::cout << "         adds " << a << "\n";
  }
  return kExitOk;
}

}  // namespace

void add_plugins_command(CLI::App& app, Context& context) {
  auto as_json = std::make_shared<bool>(false);
  auto* plugins = app.add_subcommand("plugins", "the plugin folders, and the plugins loaded or refused from them");
  plugins->add_flag("--json", *as_json, "machine-readable");
  plugins->callback([as_json, &context] { context.exit_code = plugins_command(*as_json); });
}

}  // namespace commtune::cli

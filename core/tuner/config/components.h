// The components a configuration chooses among: the engine's models,
// datasets, optimizers and hooks, built in or added by plugins, with their
// parameters. The engine defines each beside its factory and describes them
// (`commtune-worker --describe`); the tuner reads that description, kept in
// the user's cache for as long as the worker, the engine library and the
// plugin set stay the same files, so a tuner process never loads libtorch.
//
// In the tuner a component's parameters are checked by their declarations
// (kind, range, choices, required); what a component checks in code (how its
// fields relate) the engine checks (engine_check.h) before a run starts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/schema/section_schema.h"

namespace commtune {

inline constexpr const char* kEngineDescriptionFormat = "commtune.engine";
inline constexpr int kEngineDescriptionVersion = 1;

struct PluginReport {
  std::string path;
  std::string name;  // the plugin's own name ("" when refused before asking)
  bool loaded = false;
  std::string reason;              // why it was refused
  std::vector<std::string> added;  // "hook threshold_sparsify", ...
};

struct Components {
  SectionSchema models{"model", ""};
  SectionSchema datasets{"data", ""};
  SectionSchema optimizers{"optimizer", ""};
  SectionSchema hooks{"hook", ""};
  // Names the checks exactly (the store's configuration stamps, db/config_check.h); "" names nothing.
  std::string identity;
  std::vector<std::string> plugin_folders;
  std::string plugin_sdk;
  std::vector<PluginReport> plugins;
  std::string torch_version;  // the engine's libtorch
  // In a process that links the engine: its check of configurations
  // (engine_check.h), run here rather than by a worker.
  std::function<nlohmann::json(const nlohmann::json& raw_configs)> check_here;

  // From the engine's description (engine_description()). Throws
  // std::runtime_error saying what in it is not one.
  static Components from_description(const nlohmann::json& description);
};

// This process's components: the engine's own where the engine is linked in
// (it installs them), else the engine's description. Throws
// std::runtime_error when there is no engine to describe them.
const Components& components();
// What the engine calls, in the processes that link it, before anything asks.
void install_components(std::function<Components()> make);

// The engine's description as `commtune-worker --describe` prints it, from
// the cache when the files it names are unchanged. Throws std::runtime_error
// naming the worker when it cannot be had.
nlohmann::json engine_description();

// $COMMTUNE_PLUGIN_PATH (colon-separated) when set; else the user's folder
// ($XDG_DATA_HOME or ~/.local/share)/commtune/plugins and the installation's
// (<prefix>/<libdir>/commtune/plugins, found from the running binary).
std::vector<std::string> plugin_folders();
// Every *.so in the folders, in the order plugins load: folder by folder, by name.
std::vector<std::string> plugin_files(const std::vector<std::string>& folders);

}  // namespace commtune

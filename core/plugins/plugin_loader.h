// Loads plugins (plugins/commtune_plugin.h) from the plugin folders into the
// catalog, once per process, refusing any built for another SDK, libtorch
// or C++ ABI before its registration runs (only its static initialisers,
// which dlopen runs, come first).
#pragma once

#include <string>
#include <vector>

namespace commtune {

struct Catalog;

struct PluginRecord {
  std::string path;
  std::string name;  // the plugin's own name ("" when refused before asking)
  bool loaded = false;
  std::string reason;              // why it was refused
  std::vector<std::string> added;  // "hook threshold_sparsify", ...
};

// $COMMTUNE_PLUGIN_PATH (colon-separated) when set; else the user's folder
// ($XDG_DATA_HOME or ~/.local/share)/commtune/plugins and the installation's
// (<prefix>/<libdir>/commtune/plugins, found from the running binary).
std::vector<std::string> plugin_folders();

// Every *.so in the folders, in name order; returns what happened to each.
std::vector<PluginRecord> load_plugins(Catalog& catalog, const std::vector<std::string>& folders);

// What catalog() loaded.
const std::vector<PluginRecord>& loaded_plugins();

// The string a plugin must report from commtune_plugin_build().
const char* plugin_build_string();

}  // namespace commtune

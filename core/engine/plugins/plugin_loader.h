// Loads plugins (plugins/commtune_plugin.h) from the plugin folders into the
// catalog, once per process, refusing any built for another SDK, libtorch
// or C++ ABI before its registration runs (only its static initialisers,
// which dlopen runs, come first).
#pragma once

#include <string>
#include <vector>

#include "core/tuner/config/components.h"

namespace commtune {

struct Catalog;

using PluginRecord = PluginReport;

// Each plugin file (plugin_files(plugin_folders())), in order; returns what happened to each.
std::vector<PluginRecord> load_plugins(Catalog& catalog, const std::vector<std::string>& files);

// What catalog() loaded.
const std::vector<PluginRecord>& loaded_plugins();

// The string a plugin must report from commtune_plugin_build().
const char* plugin_build_string();

}  // namespace commtune

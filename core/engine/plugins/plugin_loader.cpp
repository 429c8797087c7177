#include "core/engine/plugins/plugin_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/engine/catalog.h"
#include "core/engine/plugins/plugin_abi.h"

namespace commtune {

namespace {

namespace fs = std::filesystem;

// "hook x", "model y", ... for every registered name.
std::set<std::string> registered(const Catalog& c) {
  std::set<std::string> out;
  for (const auto& n : c.hooks.names()) out.insert("hook " + n);
  for (const auto& n : c.models.names()) out.insert("model " + n);
  for (const auto& n : c.datasets.names()) out.insert("data " + n);
  for (const auto& n : c.optimizers.names()) out.insert("optimizer " + n);
  for (const auto& n : c.compressors.names()) out.insert("compressor " + n);
  return out;
}

PluginRecord load_one(Catalog& catalog, const fs::path& path) {
  PluginRecord record;
  record.path = path.string();
  void* handle = ::dlopen(record.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = ::dlerror();
    record.reason = std::string("cannot be loaded: ") + (error ? error : "unknown error");
    return record;
  }
  using Text = const char* (*)();
  using Register = void (*)(Catalog&);
  const auto build = reinterpret_cast<Text>(::dlsym(handle, "commtune_plugin_build"));
  const auto name = reinterpret_cast<Text>(::dlsym(handle, "commtune_plugin_name"));
  const auto add = reinterpret_cast<Register>(::dlsym(handle, "commtune_plugin_register"));
  // A refused library stays mapped: unloading it would unmap destructors and
  // registrations its static initialisers may have left with libtorch.
  if (!build || !name || !add) {
    record.reason = "is not a commtune plugin (no COMMTUNE_PLUGIN entry points)";
    return record;
  }
  record.name = name();
  if (std::string(build()) != plugin_build_string()) {
    record.reason = std::string("was built for ") + build() + ", this commtune is " + plugin_build_string() +
                    ": rebuild the plugin against this commtune's SDK";
    return record;
  }
  const auto before = registered(catalog);
  try {
    add(catalog);
  } catch (const std::exception& e) {
    record.reason = std::string("failed to register: ") + e.what();
    return record;  // left loaded: what it registered may point into it
  }
  for (const auto& entry : registered(catalog))
    if (!before.count(entry)) record.added.push_back(entry);
  record.loaded = true;
  return record;  // plugins stay loaded for the life of the process
}

}  // namespace

const char* plugin_build_string() { return COMMTUNE_PLUGIN_BUILD; }

std::vector<PluginRecord> load_plugins(Catalog& catalog, const std::vector<std::string>& files) {
  std::vector<PluginRecord> records;
  for (const auto& file : files) records.push_back(load_one(catalog, file));
  return records;
}

}  // namespace commtune

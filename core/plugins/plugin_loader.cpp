#include "core/plugins/plugin_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/catalog.h"
#include "core/plugins/plugin_abi.h"

namespace commtune {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_path(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(':', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

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

std::vector<std::string> plugin_folders() {
  if (const char* path = std::getenv("COMMTUNE_PLUGIN_PATH"); path) return split_path(path);
  std::vector<std::string> out;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data)
    out.push_back((fs::path(data) / "commtune" / "plugins").string());
  else if (const char* home = std::getenv("HOME"); home && *home)
    out.push_back((fs::path(home) / ".local" / "share" / "commtune" / "plugins").string());
  // Installed next to the binaries: <prefix>/bin/commtune-* and <prefix>/<libdir>/commtune/plugins.
  std::error_code error;
  const auto self = fs::read_symlink("/proc/self/exe", error);
  if (!error) out.push_back((self.parent_path().parent_path() / COMMTUNE_PLUGIN_DIR).lexically_normal().string());
  return out;
}

std::vector<PluginRecord> load_plugins(Catalog& catalog, const std::vector<std::string>& folders) {
  std::vector<PluginRecord> records;
  for (const auto& folder : folders) {
    std::error_code error;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(folder, error))
      if (entry.path().extension() == ".so") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) records.push_back(load_one(catalog, file));
  }
  return records;
}

}  // namespace commtune

#include "core/engine/catalog.h"

#include <map>
#include <mutex>

#include "core/tuner/config/run_config.h"

#include "core/engine/hooks/compressed_hook.h"
#include "core/engine/hooks/local_sgd.h"
#include "core/engine/hooks/powersgd.h"
#include "core/engine/hooks/slowmo.h"
#include "core/engine/plugins/plugin_loader.h"

namespace commtune {

namespace {
std::vector<PluginRecord>& plugin_records() {
  static std::vector<PluginRecord> records;
  return records;
}
}  // namespace

const std::vector<PluginRecord>& loaded_plugins() {
  catalog();
  return plugin_records();
}

Catalog& catalog() {
  static Catalog instance = [] {
    Catalog c;
    register_builtin_models(c.models);
    register_builtin_datasets(c.datasets);
    register_builtin_optimizers(c.optimizers);
    register_default_hooks(c.hooks);
    register_powersgd_hooks(c.hooks);
    register_compressed_hooks(c.hooks);
    register_local_sgd_hooks(c.hooks);
    register_slowmo_hooks(c.hooks);
    return c;
  }();
  // After the built-ins, so a plugin cannot take a built-in's name.
  static const bool plugins_loaded = [] {
    const auto compressors = instance.compressors.entries().size();
    plugin_records() = load_plugins(instance, plugin_files(plugin_folders()));
    if (instance.compressors.entries().size() != compressors) refresh_compressed_hooks(instance.hooks);
    return true;
  }();
  (void)plugins_loaded;
  return instance;
}

std::vector<std::vector<std::int64_t>> parameter_shapes(const RunConfig& config) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<std::vector<std::int64_t>>> known;
  const auto key = nlohmann::json{{"model", config.model}, {"data", config.data}, {"seed", config.run.seed}}.dump();
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto at = known.find(key); at != known.end()) return at->second;
  std::vector<std::vector<std::int64_t>> shapes;
  try {
    auto& cat = catalog();
    const auto dataset = cat.datasets.create(config.data, DataContext{config.run.seed});
    const auto model = cat.models.create(config.model, dataset->spec());
    for (const auto& [name, tensor] : model->named_parameters()) shapes.push_back(tensor.sizes().vec());
  } catch (const std::exception&) {  // a dataset or model file missing here: nothing to check against
    shapes.clear();
  }
  known[key] = shapes;
  return shapes;
}

}  // namespace commtune

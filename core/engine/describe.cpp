#include "core/engine/describe.h"

#include <dlfcn.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/engine/catalog.h"
#include "core/engine/hooks/hook_size.h"
#include "core/engine/plugins/plugin_loader.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/config/components.h"
#include "core/tuner/config/engine_check.h"
#include "core/tuner/io/build_id.h"

namespace commtune {

namespace {

nlohmann::json section_descriptions() {
  const auto& c = catalog();
  return nlohmann::json::array({c.models.describe(), c.datasets.describe(), c.optimizers.describe(), c.hooks.describe()});
}

// The checks' identity (what a stored configuration's stamp names): the
// builds of the code that checks, this library and every plugin loaded
// (whose options may check their values in code), and the schema they make
// together. Plugins load once, with the catalog, so it is found once.
std::string check_identity() {
  static const std::string identity = []() -> std::string {
    const auto engine = build_id_of(reinterpret_cast<const void*>(&describe_engine));
    if (engine.empty()) return "";  // code that nothing names: nothing it checks is trusted later
    std::string builds = engine;
    for (const auto& plugin : loaded_plugins()) {
      if (!plugin.loaded) continue;
      const auto id = build_id_of_loaded(plugin.path);
      if (id.empty()) return "";  // code that nothing names: nothing it checks is trusted later
      builds += "+" + id;
    }
    std::uint64_t hash = 14695981039346656037ull;  // FNV-1a of the schema's description: a name, not a secret
    for (const unsigned char c : builds + "\n" + section_descriptions().dump()) hash = (hash ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    return engine + ":" + hex;
  }();
  return identity;
}

// The file this code was loaded from (the engine library).
std::string engine_file() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&describe_engine), &info) == 0 || !info.dli_fname) return "";
  std::error_code error;
  const auto path = std::filesystem::canonical(info.dli_fname, error);
  return error ? std::string(info.dli_fname) : path.string();
}

[[maybe_unused]] const bool kComponentsFromTheCatalog = [] {
  install_components([] {
    const auto& c = catalog();
    Components out;
    out.models = c.models;  // the schema part of each registry, its checks in code included
    out.datasets = c.datasets;
    out.optimizers = c.optimizers;
    out.hooks = c.hooks;
    out.identity = check_identity();
    out.plugin_folders = plugin_folders();
    out.plugin_sdk = plugin_build_string();
    out.plugins = loaded_plugins();
    out.torch_version = TORCH_VERSION;
    out.check_here = check_for_the_tuner;
    return out;
  });
  return true;
}();

}  // namespace

nlohmann::json check_for_the_tuner(const nlohmann::json& request) {
  const auto& c = catalog();
  const SectionSchema* sections[] = {&c.models, &c.datasets, &c.optimizers, &c.hooks};
  auto refusals = nlohmann::json::array();
  for (const auto& ask : request.value(kEngineCheckSections, nlohmann::json::array())) {
    const auto name = ask.value("section", std::string());
    const auto at = std::find_if(std::begin(sections), std::end(sections), [&](const SectionSchema* s) { return s->section() == name; });
    try {
      if (at == std::end(sections)) throw ConfigError(name, "is not a section of components");
      (*at)->normalize(ask.value("value", nlohmann::json::object()));
      refusals.push_back(nullptr);
    } catch (const ConfigError& e) {
      refusals.push_back({{"field", e.field()}, {"problem", e.problem()}});
    }
  }
  auto sizes = nlohmann::json::array();
  for (const auto& ask : request.value(kEngineCheckModels, nlohmann::json::array())) {
    try {
      const auto config = RunConfig::parse(ask);
      const auto problem = hook_size_problem(config.to_json(), parameter_shapes(config));
      sizes.push_back(problem ? nlohmann::json{{"field", problem.field}, {"problem", problem.problem}} : nlohmann::json());
    } catch (const std::exception&) {  // a model this configuration cannot build says so when it runs
      sizes.push_back(nullptr);
    }
  }
  return {{kEngineCheckSections, refusals}, {kEngineCheckModels, sizes}};
}

nlohmann::json describe_engine() {
  const auto& c = components();
  nlohmann::json files = nlohmann::json::array();
  if (const auto engine = engine_file(); !engine.empty()) files.push_back(engine);
  nlohmann::json records = nlohmann::json::array();
  for (const auto& r : c.plugins) {
    if (r.loaded) files.push_back(r.path);
    records.push_back({{"path", r.path}, {"name", r.name}, {"loaded", r.loaded}, {"reason", r.reason}, {"added", r.added}});
  }
  return {{"format", kEngineDescriptionFormat},
          {"version", kEngineDescriptionVersion},
          {"identity", c.identity},
          {"torch", c.torch_version},
          {"files", files},
          {"plugins", {{"folders", c.plugin_folders}, {"sdk", c.plugin_sdk}, {"records", records}}},
          {"sections", section_descriptions()}};
}

}  // namespace commtune

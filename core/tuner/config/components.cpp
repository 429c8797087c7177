#include "core/tuner/config/components.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/launcher.h"
#include "core/tuner/launch/worker_call.h"
#include "db/json_text.h"

namespace commtune {

namespace fs = std::filesystem;

namespace {

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

std::vector<std::string> texts(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  const auto at = j.find(key);
  if (at == j.end()) return out;
  if (!at->is_array()) throw std::runtime_error(std::string("'") + key + "' is not a list");
  for (const auto& t : *at) {
    if (!t.is_string()) throw std::runtime_error(std::string("'") + key + "' holds something other than text");
    out.push_back(t.get<std::string>());
  }
  return out;
}

// What says a file is the one described: its identity and its last change.
nlohmann::json file_signature(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return nullptr;
  return {path, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

// What a description holds for: the worker, the files it names (its engine
// library, the plugins it loaded), and the plugin files to be found now.
nlohmann::json signature(const std::string& worker, const nlohmann::json& description) {
  nlohmann::json files = nlohmann::json::array({file_signature(worker)});
  for (const auto& f : texts(description, "files")) files.push_back(file_signature(f));
  nlohmann::json plugins = nlohmann::json::array();
  for (const auto& f : plugin_files(plugin_folders())) plugins.push_back(file_signature(f));
  return {{"files", files}, {"plugins", plugins}};
}

std::string cache_file(const std::string& worker) {
  fs::path folder;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    folder = cache;
  else if (const char* home = std::getenv("HOME"); home && *home)
    folder = fs::path(home) / ".cache";
  else
    return "";
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a of the worker's path: one file per engine
  for (const unsigned char c : fs::absolute(worker).lexically_normal().string()) hash = (hash ^ c) * 1099511628211ull;
  char name[40];
  std::snprintf(name, sizeof name, "engine-%016llx.json", static_cast<unsigned long long>(hash));
  return (folder / "commtune" / name).string();
}

nlohmann::json read_cached(const std::string& file, const std::string& worker) {
  if (file.empty()) return nullptr;
  std::ifstream in(file, std::ios::binary);
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = parse_json_text(text.str());
  if (!parsed.problem.empty() || !parsed.json.is_object() || !parsed.json.contains("description")) return nullptr;
  auto& description = parsed.json["description"];
  try {
    if (parsed.json.value("signature", nlohmann::json()) != signature(worker, description)) return nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
  return std::move(description);
}

void write_cached(const std::string& file, const std::string& worker, const nlohmann::json& description) {
  if (file.empty()) return;
  try {  // a cache that cannot be written costs the next process the worker's start, nothing more
    fs::create_directories(fs::path(file).parent_path());
    write_file_whole(file, nlohmann::json{{"signature", signature(worker, description)}, {"description", description}}.dump());
  } catch (const std::exception&) {
  }
}

struct Installed {
  std::mutex mutex;
  std::function<Components()> make;
  std::unique_ptr<Components> made;
};
Installed& installed() {
  static Installed instance;
  return instance;
}

}  // namespace

Components Components::from_description(const nlohmann::json& d) {
  if (!d.is_object() || d.value("format", std::string()) != kEngineDescriptionFormat)
    throw std::runtime_error("not a description of commtune's engine");
  if (d.value("version", 0) != kEngineDescriptionVersion)
    throw std::runtime_error("a description of commtune's engine of version " + d.value("version", nlohmann::json()).dump() +
                             "; this commtune reads version " + std::to_string(kEngineDescriptionVersion));
  Components c;
  const auto sections = d.value("sections", nlohmann::json::array());
  for (SectionSchema* s : {&c.models, &c.datasets, &c.optimizers, &c.hooks}) {
    const auto at = std::find_if(sections.begin(), sections.end(), [&](const nlohmann::json& j) {
      return j.is_object() && j.value("section", std::string()) == s->section();
    });
    if (at == sections.end()) throw std::runtime_error("the engine's description has no section " + s->section());
    *s = SectionSchema::from_description(*at);
  }
  // The tuner checks by the declarations alone: its own name for the same schema.
  const auto identity = d.value("identity", std::string());
  c.identity = identity.empty() ? "" : identity + "/declared";
  c.torch_version = d.value("torch", std::string());
  const auto plugins = d.value("plugins", nlohmann::json::object());
  c.plugin_folders = texts(plugins, "folders");
  c.plugin_sdk = plugins.value("sdk", std::string());
  for (const auto& r : plugins.value("records", nlohmann::json::array()))
    c.plugins.push_back({r.value("path", std::string()), r.value("name", std::string()), r.value("loaded", false),
                         r.value("reason", std::string()), texts(r, "added")});
  return c;
}

void install_components(std::function<Components()> make) {
  auto& i = installed();
  std::lock_guard<std::mutex> lock(i.mutex);
  i.make = std::move(make);
  i.made.reset();
}

const Components& components() {
  auto& i = installed();
  std::lock_guard<std::mutex> lock(i.mutex);
  if (!i.made)
    i.made = std::make_unique<Components>(i.make ? i.make() : Components::from_description(engine_description()));
  return *i.made;
}

nlohmann::json engine_description() {
  const auto worker = default_worker_path();
  const auto cache = cache_file(worker);
  if (auto cached = read_cached(cache, worker); !cached.is_null()) return cached;
  auto description = call_worker("--describe", "describe its components");
  Components::from_description(description);  // throws when it is none: nothing unreadable is kept
  write_cached(cache, worker, description);
  return description;
}

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

std::vector<std::string> plugin_files(const std::vector<std::string>& folders) {
  std::vector<std::string> out;
  for (const auto& folder : folders) {
    std::error_code error;
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(folder, error))
      if (entry.path().extension() == ".so") files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

}  // namespace commtune

#include "core/tuner/config/run_config.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>

#include "core/tuner/config/components.h"
#include "core/tuner/config/world_groups.h"
#include "core/tuner/io/input_file.h"
#include "db/store.h"

namespace commtune {

Schema<RunOptions> RunOptions::schema() {
  return Schema<RunOptions>()
      .integer("world_size", &RunOptions::world_size, {0, 4096}, "ranks",
               "number of ranks (0: one per visible GPU, or 2 on CPU)")
      .choice("device", &RunOptions::device, {"auto", "cpu", "cuda"},
              "where ranks train: cuda with NCCL, cpu with Gloo; auto picks cuda when a GPU is visible")
      .choice("backend", &RunOptions::backend, {"auto", "nccl", "gloo"},
              "the process group's backend: auto is nccl on GPUs and gloo on the CPU; gloo on GPUs lets several "
              "ranks share one GPU (rank r on GPU r mod the GPUs visible), which NCCL refuses")
      .integer("steps", &RunOptions::steps, {1, 1LL << 40}, "steps", "optimizer steps to run")
      .integer("seed", &RunOptions::seed, {0, static_cast<double>(kMaxSeed)}, "",
               "seed for model initialisation, synthetic data and shuffling")
      .integer("threads", &RunOptions::threads, {0, 1024}, "threads",
               "intra-op CPU threads per rank (0: cores divided among the local ranks)")
      .choice("cpu_affinity", &RunOptions::cpu_affinity, {"none", "cores"},
              "cores: on CPU, bind each rank to its own equal share of the cores; none: leave placement to the "
              "OS (faster when a rank has one core: its communication threads can then use idle cores)")
      .real("timeout_s", &RunOptions::timeout_s, {0, 3600, true}, "s",
            "rendezvous and collective timeout: a rank that stops answering fails the run after this long")
      .choice("on_nonfinite", &RunOptions::on_nonfinite, {"stop", "warn"},
              "a NaN or infinite loss (or gradient norm) ends the run as diverged at once (stop), or once all its "
              "steps ran (warn); either way the run is diverged, never succeeded")
      .flag("oversubscribe", &RunOptions::oversubscribe,
            "on CPU, allow more than 4 ranks per core (each rank is a process with its own threads and memory: "
            "by default such a world_size is refused rather than started)")
      .flag("deterministic", &RunOptions::deterministic,
            "deterministic kernels only, as PyTorch's torch.use_deterministic_algorithms(True, warn_only=True) with "
            "cuDNN's deterministic algorithms and cuBLAS's fixed workspace: on a GPU a run then repeats bit for bit "
            "(a little slower); an op without such a kernel warns");
}

Schema<WeightsOptions> WeightsOptions::schema() {
  return Schema<WeightsOptions>()
      .text("init", &WeightsOptions::init, "start from the weights in this file (name -> tensor dict, torch.load-able)")
      .text("save_initial", &WeightsOptions::save_initial,
            "write the initial weights here (rank 0), so PyTorch can replay the run from the same start")
      .text("save_final", &WeightsOptions::save_final,
            "write the final weights here (rank 0's; with {rank} in the path, every rank's)");
}

Schema<DebugOptions> DebugOptions::schema() {
  return Schema<DebugOptions>()
      .integer("dump_grads_steps", &DebugOptions::dump_grads_steps, Range::at_least(0), "steps",
               "for the first N steps, write each rank's local and reduced gradients (and a stateful hook's state) to "
               "dump_dir")
      .text("dump_dir", &DebugOptions::dump_dir, "folder for gradient dumps (grads-rank<r>-step<s>.pt)")
      .integer("fail_rank", &DebugOptions::fail_rank, Range::at_least(-1), "rank",
               "fault injection: this rank raises an error at fail_at_step (-1: none), to try out failure handling")
      .integer("fail_at_step", &DebugOptions::fail_at_step, Range::at_least(0), "step",
               "the step at which fail_rank raises its error")
      .real("init_noise", &DebugOptions::init_noise, Range::at_least(0), "",
            "ranks start apart: after the initial broadcast each rank adds Gaussian noise of this standard deviation "
            "(seeded by seed and rank) to its parameters, to see how a hook brings them to consensus");
}

namespace {

struct PlainSection {
  const char* key;
  ParamSet params;
};

const std::vector<PlainSection>& plain_sections() {
  static const std::vector<PlainSection> sections = {
      {"ddp", ReducerOptions::schema().erase()},           {"weights", WeightsOptions::schema().erase()},
      {"checkpoint", CheckpointOptions::schema().erase()}, {"network", NetworkOptions::schema().erase()},
      {"debug", DebugOptions::schema().erase()},
  };
  return sections;
}

const ParamSet& root_params() {
  static const ParamSet set = RunOptions::schema().erase();
  return set;
}

// Visits the four sections that name a component.
template <class Fn>
void for_each_registry(Fn fn) {
  const auto& c = components();
  fn(c.models);
  fn(c.datasets);
  fn(c.optimizers);
  fn(c.hooks);
}

// The sections' keys: plugins add components, never sections.
const std::vector<std::string>& section_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out = {"model", "data", "optimizer", "hook", "script"};
    for (const auto& s : plain_sections()) out.push_back(s.key);
    return out;
  }();
  return keys;
}

const nlohmann::json& section_or_empty(const nlohmann::json& raw, const std::string& key) {
  static const nlohmann::json empty = nlohmann::json::object();
  auto it = raw.find(key);
  return it == raw.end() ? empty : *it;
}

}  // namespace

namespace {
// The fixed sections' schemas, built once: every stored run a listing reads
// is parsed through them, and a plan of 10^6 trials parses each trial.
struct SectionSchemas {
  Schema<RunOptions> run = RunOptions::schema();
  Schema<ReducerOptions> ddp = ReducerOptions::schema();
  Schema<WeightsOptions> weights = WeightsOptions::schema();
  Schema<CheckpointOptions> checkpoint = CheckpointOptions::schema();
  Schema<NetworkOptions> network = NetworkOptions::schema();
  Schema<DebugOptions> debug = DebugOptions::schema();
};
const SectionSchemas& section_schemas() {
  static const SectionSchemas schemas;
  return schemas;
}
}  // namespace

RunConfig RunConfig::parse(const nlohmann::json& raw) {
  if (!raw.is_object()) throw ConfigError("", "a configuration must be a JSON object");
  check_known_keys(raw, "", {&root_params()}, section_keys());
  const auto& schemas = section_schemas();
  RunConfig c;
  c.run = schemas.run.read(raw, "");
  for (const auto& s : plain_sections()) check_known_keys(section_or_empty(raw, s.key), s.key, {&s.params});
  c.ddp = schemas.ddp.read(section_or_empty(raw, "ddp"), "ddp");
  c.ddp.first_bucket_cap_mb = c.ddp.first_bucket_cap();
  c.weights = schemas.weights.read(section_or_empty(raw, "weights"), "weights");
  c.checkpoint = schemas.checkpoint.read(section_or_empty(raw, "checkpoint"), "checkpoint");
  c.network = schemas.network.read(section_or_empty(raw, "network"), "network");
  c.debug = schemas.debug.read(section_or_empty(raw, "debug"), "debug");
  c.script = ScriptOptions::parse(section_or_empty(raw, "script"));
  if (c.run.backend == "nccl" && c.run.device == "cpu")
    throw ConfigError("backend", "is nccl, which runs on GPUs only: set device=cuda, or backend=gloo or auto on the CPU");
  if (c.debug.dump_grads_steps > 0 && c.debug.dump_dir.empty())
    throw ConfigError("debug.dump_dir", "set a folder for the gradient dumps that debug.dump_grads_steps asks for");
  const auto& cat = components();
  c.model = cat.models.normalize(section_or_empty(raw, "model"));
  c.data = cat.datasets.normalize(section_or_empty(raw, "data"));
  c.optimizer = cat.optimizers.normalize(section_or_empty(raw, "optimizer"));
  c.hook = cat.hooks.normalize(section_or_empty(raw, "hook"));
  return c;
}

namespace {
// Every process reads the store's configurations through the schema
// (db/store.h): a bad row is shown as such, and no reader meets a value the
// schema would refuse. The stamps name the components' checks
// (Components::identity).
[[maybe_unused]] const bool kStoreReadsThroughTheSchema = [] {
  db::install_config_check([](const nlohmann::json& raw) { return RunConfig::parse(raw).take_json(); },
                           [] { return components().identity; });
  return true;
}();
}  // namespace

void RunConfig::check_world_size(int world_size) const {
  network.emulated_cluster(world_size);  // throws when network.ranks_per_node does not divide it
  if (debug.fail_rank >= world_size)
    throw ConfigError("debug.fail_rank", "is " + std::to_string(debug.fail_rank) + ", but the run's ranks are 0.." +
                                             std::to_string(world_size - 1) + " (-1: no injected failure)");
  const auto name = hook.value("name", std::string());
  const auto group = [&](const char* key) {
    const auto size = hook.value(key, std::int64_t{0});
    if (size > 0) check_group_size(world_size, static_cast<int>(std::min<std::int64_t>(size, 1 << 20)), join_path("hook", key));
  };
  if (name == "byteps") group("ranks_per_node");
  if (name == "post_local_sgd") {
    group("subgroup_size");
    hierarchy_levels(hook.value("hierarchy", std::string()), world_size);
  }
}

RunConfig RunConfig::from_file(const std::string& path) {
  nlohmann::json raw;
  try {
    raw = read_json_file(path);
  } catch (const std::runtime_error& e) {
    throw ConfigError("", e.what());
  }
  return parse(raw);
}

nlohmann::json RunConfig::to_json() const { return RunConfig(*this).take_json(); }

nlohmann::json RunConfig::take_json() {
  const auto& schemas = section_schemas();
  auto j = schemas.run.write(run);
  j["model"] = std::move(model);
  j["data"] = std::move(data);
  j["optimizer"] = std::move(optimizer);
  j["hook"] = std::move(hook);
  j["ddp"] = schemas.ddp.write(ddp);
  j["weights"] = schemas.weights.write(weights);
  j["checkpoint"] = schemas.checkpoint.write(checkpoint);
  j["network"] = schemas.network.write(network);
  j["debug"] = schemas.debug.write(debug);
  if (script.enabled()) j["script"] = script.to_json();  // an engine run's configuration is as it always was
  return j;
}

namespace {

constexpr std::string_view kScriptArgs = "script.args.";

// script.KEY's declaration: a field of the section, or one of the script's own options.
ParamSpec script_param_spec(const std::string& key) {
  if (key.rfind("args.", 0) == 0) return ScriptOptions::arg_spec(key.substr(5));
  if (key == "argv")
    throw ConfigError("script.argv", "is the script's own command line: give it after -- (commtune-cli run --script "
                                     "FILE -- ARGS), or as a list of strings in the configuration");
  static const auto params = ScriptOptions::schema().erase();
  if (key == "args") throw ConfigError("script.args", "is a section: set one option, script.args.NAME=VALUE");
  if (const auto* found = params.find(key)) return *found;
  check_known_keys({{key, nullptr}}, "script", {&params}, {"args", "argv"});
  throw ConfigError("script." + key, "is not a parameter");
}

}  // namespace

ParamSpec param_spec(const nlohmann::json& raw, std::string_view path_view) {
  const std::string path(path_view);
  static const nlohmann::json empty = nlohmann::json::object();
  if (path.rfind("script.", 0) == 0) return script_param_spec(path.substr(7));
  const auto dot = path.find('.');
  if (dot == std::string::npos) {
    const auto* spec = root_params().find(path);
    if (!spec) check_known_keys({{path, nullptr}}, "", {&root_params()}, section_keys());  // throws with a hint
    if (!spec) throw ConfigError(path, "is a section, not a parameter");
    return *spec;
  }
  const auto section = path.substr(0, dot), key = path.substr(dot + 1);
  const auto& target = raw.is_object() && raw.contains(section) && raw[section].is_object() ? raw[section] : empty;
  std::optional<ParamSpec> spec;
  bool known_section = false;
  for_each_registry([&](const auto& r) {
    if (r.section() != section) return;
    known_section = true;
    if (key == "name") {
      spec = r.name_spec();
    } else if (const auto* found = r.find_spec(target, key)) {
      spec = *found;
    } else {
      auto probe = target;
      probe[key] = nullptr;
      r.normalize(probe);  // throws: unknown parameter, with the allowed names
    }
  });
  for (const auto& s : plain_sections()) {
    if (section != s.key) continue;
    known_section = true;
    if (const auto* found = s.params.find(key)) spec = *found;
    if (!spec) check_known_keys({{key, nullptr}}, section, {&s.params});
  }
  if (!known_section) check_known_keys({{section, nullptr}}, "", {&root_params()}, section_keys());
  if (!spec) throw ConfigError(path, "is not a parameter");
  return *spec;
}

void set_param(nlohmann::json& raw, std::string_view path_view, const nlohmann::json& value) {
  const std::string path(path_view);
  const auto checked = check_param(param_spec(raw, path), value, path);
  if (!raw.is_object()) raw = nlohmann::json::object();
  const auto dot = path.find('.');
  if (dot == std::string::npos) {
    raw[path] = checked;
    return;
  }
  const auto section = path.substr(0, dot), key = path.substr(dot + 1);
  if (path.rfind(kScriptArgs, 0) == 0) {
    auto& args = raw["script"]["args"];
    if (!args.is_object()) args = nlohmann::json::object();
    args[path.substr(kScriptArgs.size())] = checked;
    return;
  }
  auto& target = raw[section];
  if (!target.is_object()) target = nlohmann::json::object();
  if (key == "name" && target.value("name", checked) != checked) {
    // Another entry: keep only the keys it declares too (common ones, such as a hook's wrapper).
    nlohmann::json kept = nlohmann::json::object();
    nlohmann::json probe = {{"name", checked}};
    for (const auto& item : target.items()) {
      const std::string& k = item.key();  // not a structured binding: C++17 lambdas cannot capture one
      if (k == "name") continue;
      bool declared = false;
      for_each_registry([&](const auto& r) {
        if (r.section() == section) declared = r.find_spec(probe, k) != nullptr;
      });
      if (declared) kept[k] = item.value();
    }
    target = std::move(kept);
  }
  target[key] = checked;
}

void apply_override(nlohmann::json& raw, std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw ConfigError(
        "", "an override reads path=value (e.g. hook.name=fp16_compress), got '" + std::string(assignment) + "'");
  const std::string path(assignment.substr(0, eq));
  set_param(raw, path, parse_param_text(param_spec(raw, path), assignment.substr(eq + 1), path));
}

nlohmann::json load_raw_config(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json raw = nlohmann::json::object();
  if (!path.empty()) raw = RunConfig::from_file(path).to_json();
  for (const auto& o : overrides) apply_override(raw, o);
  return raw;
}

nlohmann::json describe_schema() {
  nlohmann::json j;
  j["root"] = nlohmann::json::array();
  for (const auto& s : root_params().specs) j["root"].push_back(s.to_json());
  j["sections"] = nlohmann::json::array();
  for_each_registry([&](const auto& r) { j["sections"].push_back(r.describe()); });
  for (const auto& s : plain_sections()) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& spec : s.params.specs) params.push_back(spec.to_json());
    j["sections"].push_back({{"section", s.key}, {"params", params}});
  }
  nlohmann::json script = nlohmann::json::array();
  for (const auto& spec : ScriptOptions::schema().specs()) script.push_back(spec.to_json());
  j["sections"].push_back({{"section", "script"}, {"params", script}});
  return j;
}

}  // namespace commtune

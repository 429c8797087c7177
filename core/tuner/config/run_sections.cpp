#include "core/tuner/config/run_sections.h"

#include <algorithm>
#include <cctype>

#include "core/tuner/config/command_line.h"

namespace commtune {

Schema<ReducerOptions> ReducerOptions::schema() {
  return Schema<ReducerOptions>()
      .real("bucket_cap_mb", &ReducerOptions::bucket_cap_mb, Range::above(0), "MiB",
            "gradient bucket size limit (DDP's bucket_cap_mb)", true)
      .real("first_bucket_cap_mb", &ReducerOptions::first_bucket_cap_mb, Range::at_least(0), "MiB",
            "size limit of the first bucket once buckets are rebuilt; 0: as PyTorch 2.x's DDP, 1 MiB with the "
            "default bucket_cap_mb (25), else bucket_cap_mb", true)
      .flag("rebuild_buckets", &ReducerOptions::rebuild_buckets,
            "as DDP: step 0 reduces one bucket in parameter order, then buckets are rebuilt in the order gradients "
            "became ready; off: fixed buckets over the parameters in reverse order");
}

double ReducerOptions::first_bucket_cap() const {
  if (first_bucket_cap_mb > 0) return first_bucket_cap_mb;
  return bucket_cap_mb == kDefaultBucketCapMb ? 1.0 : bucket_cap_mb;
}

Schema<NetworkOptions> NetworkOptions::schema() {
  std::vector<std::string> choices = {"none", "custom"};
  for (const auto& link : net::link_presets()) choices.push_back(link.name);
  return Schema<NetworkOptions>()
      .choice("emulate", &NetworkOptions::emulate, choices,
              "delay every collective to what it would take on this network (a preset, or custom: bandwidth_gbit_s "
              "and latency_us); none runs at local speed")
      .real("bandwidth_gbit_s", &NetworkOptions::bandwidth_gbit_s, Range::above(0), "Gbit/s",
            "bandwidth of the custom network", true)
      .real("latency_us", &NetworkOptions::latency_us, Range::at_least(0), "us", "latency of the custom network")
      .integer("ranks_per_node", &NetworkOptions::ranks_per_node, {1, 4096}, "ranks",
               "ranks that share a node in the emulated cluster (1: every rank on its own node, all traffic over the "
               "emulated network)");
}

std::optional<net::Cluster> NetworkOptions::emulated_cluster(int world_size) const {
  if (emulate == "none") return std::nullopt;
  if (world_size % ranks_per_node != 0)
    throw ConfigError("network.ranks_per_node", "must divide the world size " + std::to_string(world_size) + ", got " +
                                                    std::to_string(ranks_per_node));
  const auto link = emulate == "custom" ? net::custom_link(bandwidth_gbit_s, latency_us)
                                        : net::link_preset(emulate, "network.emulate");
  net::Cluster cluster;
  cluster.nodes = world_size / static_cast<int>(ranks_per_node);
  cluster.gpus_per_node = static_cast<int>(ranks_per_node);
  cluster.inter = link;
  cluster.intra = link;  // with one node, the emulated network is the one between its ranks
  return cluster;
}

Schema<CheckpointOptions> CheckpointOptions::schema() {
  return Schema<CheckpointOptions>()
      .text("dir", &CheckpointOptions::dir,
            "write checkpoints under this folder (step-NNNNNN/rank-R.pt), and one after the last step")
      .integer("every", &CheckpointOptions::every, Range::at_least(0), "steps",
               "also checkpoint every N steps (0: only after the last step)")
      .text("resume", &CheckpointOptions::resume,
            "continue from this checkpoint folder (a step-NNNNNN folder written with the same world size)");
}

namespace {

// A script's option names and texts: bounded, so a configuration cannot make
// a command line the kernel refuses (or one of gigabytes).
constexpr std::size_t kMaxScriptArgs = 256;
constexpr std::size_t kMaxArgChars = 4096;

bool option_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; });
}

void check_option_name(const std::string& name, const std::string& field) {
  if (!option_name(name))
    throw ConfigError(field, "'" + name + "' is not an option name: letters, digits, _ - and ., up to 64, not "
                             "starting with -");
}

void check_arg_text(const std::string& text, const std::string& field) {
  if (text.size() > kMaxArgChars)
    throw ConfigError(field, "is " + std::to_string(text.size()) + " characters, over " + std::to_string(kMaxArgChars));
  if (text.find('\0') != std::string::npos) throw ConfigError(field, "holds a NUL character");
}

// A path that launch scripts name, in comments too: no control character
// (a newline would end a comment and run the rest).
void check_path_text(const std::string& text, const std::string& field) {
  for (const unsigned char c : text)
    if (c < 0x20 || c == 0x7f) throw ConfigError(field, "holds a control character (code " + std::to_string(c) + ")");
}

// A number as a command line writes it: integers without a point, others in their shortest exact form.
std::string arg_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

Schema<ScriptOptions> ScriptOptions::schema() {
  return Schema<ScriptOptions>()
      .text_checked(
          "path", &ScriptOptions::path, [](const std::string& path) { check_path_text(path, "script.path"); },
          "the user's own DDP training script to run as the job (python/commtune attaches to it); empty: the "
            "engine trains the run")
      .text_checked(
          "python", &ScriptOptions::python, [](const std::string& path) { check_path_text(path, "script.python"); },
          "the Python whose torchrun runs the script (its torch, 2.4 or later, is the one trained with)")
      .text_checked(
          "steps_arg", &ScriptOptions::steps_arg,
          [](const std::string& name) {
            if (!name.empty()) check_option_name(name, "script.steps_arg");
          },
          "the script's option that takes the number of steps (passed as --NAME STEPS, and the run must log that "
          "many); empty: the script decides how many steps it runs")
      .real("timeout_s", &ScriptOptions::timeout_s, {0, 86400, true}, "s",
            "a rank that writes nothing for this long (before commtune.attach: no rank's first event) fails the "
            "run, which is ended with the script's whole process tree");
}

ParamSpec ScriptOptions::arg_spec(const std::string& name) {
  check_option_name(name, "script.args." + name);
  ParamSpec spec;
  spec.name = name;
  spec.kind = ParamKind::Scalar;
  spec.doc = "the script's option --" + name;
  return spec;
}

std::string ScriptOptions::args_text() const {
  std::vector<std::string> words;
  for (const auto& [name, value] : args.items()) words.push_back(name + "=" + arg_text(value));
  return join_command_line(words);
}

nlohmann::json ScriptOptions::args_from_text(std::string_view text) {
  auto out = nlohmann::json::object();
  for (const auto& word : split_command_line(text, "script.args", kMaxScriptArgs * kMaxArgChars)) {
    const auto equals = word.find('=');
    if (equals == std::string::npos)
      throw ConfigError("script.args", "'" + word + "' is not NAME=VALUE");
    const auto name = word.substr(0, equals);
    const auto field = "script.args." + name;
    if (out.contains(name)) throw ConfigError(field, "is given twice");
    out[name] = parse_param_text(arg_spec(name), std::string_view(word).substr(equals + 1), field);
  }
  return out;
}

ScriptOptions ScriptOptions::parse(const nlohmann::json& section) {
  static const auto schema = ScriptOptions::schema();
  static const auto params = schema.erase();
  check_known_keys(section, "script", {&params}, {"args", "argv"});
  auto options = schema.read(section, "script");
  if (const auto it = section.find("args"); it != section.end()) {
    if (!it->is_object()) throw ConfigError("script.args", "must be an object of option names and values");
    if (it->size() > kMaxScriptArgs)
      throw ConfigError("script.args", "has " + std::to_string(it->size()) + " options, over " +
                                           std::to_string(kMaxScriptArgs));
    for (const auto& [name, value] : it->items()) {
      const auto field = "script.args." + name;
      options.args[name] = check_param(arg_spec(name), value, field);
      if (value.is_string()) check_arg_text(value.get<std::string>(), field);
      if (name == options.steps_arg)
        throw ConfigError(field, "is script.steps_arg, which the run's steps set");
    }
  }
  if (const auto it = section.find("argv"); it != section.end()) {
    if (!it->is_array()) throw ConfigError("script.argv", "must be a list of strings");
    if (it->size() > kMaxScriptArgs)
      throw ConfigError("script.argv", "has " + std::to_string(it->size()) + " entries, over " +
                                           std::to_string(kMaxScriptArgs));
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto field = "script.argv." + std::to_string(i);
      if (!(*it)[i].is_string()) throw ConfigError(field, "is not a string");
      check_arg_text((*it)[i].get<std::string>(), field);
      options.argv.push_back((*it)[i].get<std::string>());
    }
  }
  if (!options.enabled() && (!options.args.empty() || !options.argv.empty()))
    throw ConfigError("script.path", "is empty, but the section gives the script arguments: name the script");
  return options;
}

nlohmann::json ScriptOptions::to_json() const {
  static const auto schema = ScriptOptions::schema();
  auto j = schema.write(*this);
  j["args"] = args;
  j["argv"] = argv;
  return j;
}

std::vector<std::string> ScriptOptions::command_args(std::int64_t steps) const {
  std::vector<std::string> out;
  if (!steps_arg.empty()) {
    out.push_back("--" + steps_arg);
    out.push_back(std::to_string(steps));
  }
  for (const auto& [name, value] : args.items()) {
    if (value.is_boolean()) {
      if (value.get<bool>()) out.push_back("--" + name);
      continue;
    }
    out.push_back("--" + name);
    out.push_back(arg_text(value));
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace commtune

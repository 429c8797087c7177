// libFuzzer target: run configurations (JSON files, --set overrides), sweep
// specs, and a script's command line as the app's fields read it. Any input is either accepted or a ConfigError naming the
// field; nothing else may escape, and an accepted configuration survives its
// own round trip.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/tuner/config/command_line.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/sweep/sweep_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The first line may be a --set override applied to the rest.
  const auto newline = text.find('\n');
  const auto json = nlohmann::json::parse(newline == std::string::npos ? text : text.substr(newline + 1), nullptr,
                                          false);
  try {  // the first line as the app's script-arguments and script-options fields read it
    const auto first = std::string_view(text).substr(0, newline);
    const auto words = commtune::split_command_line(first, "script.argv");
    if (commtune::split_command_line(commtune::join_command_line(words), "script.argv") != words) __builtin_trap();
    commtune::ScriptOptions script;
    script.args = commtune::ScriptOptions::args_from_text(first);
    if (commtune::ScriptOptions::args_from_text(script.args_text()) != script.args) __builtin_trap();
  } catch (const commtune::ConfigError&) {
  }
  if (json.is_discarded()) return 0;
  try {
    auto raw = json;
    if (newline != std::string::npos && raw.is_object()) commtune::apply_override(raw, text.substr(0, newline));
    const auto config = commtune::RunConfig::parse(raw);
    if (commtune::RunConfig::parse(config.to_json()).to_json() != config.to_json()) __builtin_trap();
  } catch (const commtune::ConfigError&) {
  }
  try {
    auto spec = json;
    if (spec.is_object() && spec.value("max_trials", 0) == 0) spec["max_trials"] = 64;  // keep planning cheap
    const auto parsed = commtune::SweepSpec::parse(spec);
    if (commtune::SweepSpec::parse(parsed.to_json()).to_json() != parsed.to_json()) __builtin_trap();
  } catch (const commtune::ConfigError&) {
  }
  return 0;
}

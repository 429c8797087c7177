// A run whose job is the user's own DDP training script: torchrun of the
// script's Python starts its ranks on this machine, each rank's
// python/commtune (a copy the tuner carries, first on PYTHONPATH) reads the
// trial's configuration from COMMTUNE_TRIAL_CONFIG and writes its events to
// COMMTUNE_EVENT_FILE, and those files stream to the subscribers as `import
// --follow` streams them. The outcome is decided as for the engine's workers;
// the script's exit ends the reading, and a script that fails, hangs or is
// stopped is ended with its whole process tree.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/config/run_sections.h"
#include "core/tuner/launch/launcher.h"

namespace commtune {

struct ScriptLaunch {
  nlohmann::json config;  // the validated configuration (RunConfig::to_json), handed to every rank
  ScriptOptions script;
  int world_size = 2;
  std::int64_t steps = 0;
  std::int64_t threads = 0;                              // OMP_NUM_THREADS per rank (0: torchrun's own choice)
  std::vector<std::pair<std::string, std::string>> env;  // more environment (CUDA_VISIBLE_DEVICES)
  bool echo_output = false;                              // copy the script's output to stderr
  std::chrono::milliseconds kill_grace{3000};            // SIGTERM -> SIGKILL of the process tree
  std::function<std::string()> abort_reason;             // as LaunchOptions'
};

// Blocks until the script has ended and its events are read. Setting
// `*cancel` stops it. Throws ConfigError (script.path, script.python)
// before anything starts.
RunOutcome launch_script(const ScriptLaunch& launch, const std::vector<EventSubscriber*>& subscribers,
                         const std::atomic<bool>* cancel = nullptr);

// That the script is a readable file and its Python has a torch it can
// use. Throws ConfigError naming script.path or script.python.
void check_script(const ScriptOptions& script);

// The torch version of `python` ("2.11.0+cpu"), asked once per process and
// interpreter. Throws ConfigError naming script.python when it cannot be
// run, has no torch, or one older than kOldestScriptTorch.
std::string script_torch_version(const std::string& python);
inline constexpr const char* kOldestScriptTorch = "2.4";

// The script and, when it is named by a path, its Python, as absolute paths
// from this process's folder: a script runs in its own folder, and a job's
// nodes find both where this process does.
ScriptOptions with_absolute_paths(ScriptOptions script);

// The files of python/commtune, compiled into the tuner: (name, text).
const std::vector<std::pair<std::string, std::string>>& script_package_files();

}  // namespace commtune

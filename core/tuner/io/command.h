// Runs a program (no shell) and collects what it prints: for the cluster's
// own tools (sbatch, squeue, scontrol, scancel), whose answers are parsed.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace commtune {

struct CommandResult {
  int exit_code = -1;  // -1 when a signal (or the timeout) ended it
  std::string out, err;
  bool timed_out = false;
  bool ok() const { return exit_code == 0 && !timed_out; }
  // One line for humans: the command's stderr (or stdout), or how it ended.
  std::string problem() const;
};

// Throws std::runtime_error when the program cannot be started (not on
// PATH). `env`: variables set on top of this process's environment; `cwd`:
// the folder it runs in ("": this process's). The program is killed at
// `timeout`; each stream keeps at most 1 MiB.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::vector<std::pair<std::string, std::string>>& env = {},
                          const std::string& cwd = "");

}  // namespace commtune

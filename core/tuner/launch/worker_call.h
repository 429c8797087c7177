// Asking the engine for what only it can do, by running `commtune-worker`
// with a request (the tuner's door to libtorch: its components, their checks,
// a PowerSGD state file). A request travels as a file, which can outgrow a
// pipe's buffer; the answer is JSON on the worker's stdout.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

// Runs `commtune-worker <flag> [REQUEST_FILE] <args...>` (the request file
// only when `request` is not null) and returns what it printed, as JSON.
// Throws std::runtime_error naming the worker and `what` (in words: "check
// the configuration") when it cannot be run, fails, or prints something else.
nlohmann::json call_worker(const std::string& flag, const std::string& what, const nlohmann::json& request = nullptr,
                           const std::vector<std::string>& args = {});

}  // namespace commtune

// Reading files that come from outside (data, weights, checkpoints, models):
// only regular files, read to their real size and no further, with a limit,
// so that a folder, a pipe or /dev/zero is one clear error, never a hang or
// an unbounded allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

inline constexpr std::uint64_t kMaxInputFileBytes = std::uint64_t{64} << 30;  // 64 GiB

// Why `path` cannot be read as an input file ("" when it can): missing, a
// folder, or not a regular file (a pipe, a device).
std::string input_file_problem(const std::string& path);

// The bytes of a regular file, at most `max_bytes`. Throws std::runtime_error
// naming the file and the problem.
std::vector<char> read_input_file(const std::string& path, std::uint64_t max_bytes = kMaxInputFileBytes);

// A JSON file (comments allowed) of at most `max_bytes`, nesting at most
// kMaxJsonDepth deep. Throws std::runtime_error naming the file.
nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes = std::uint64_t{64} << 20);

}  // namespace commtune

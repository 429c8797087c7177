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

// A file opened for reading only if it is a regular file, checked on the
// open descriptor (what was checked is what is read). Opening never waits:
// O_NONBLOCK returns at once on a FIFO, which is then refused.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Why it cannot be read ("" when it can): missing, a folder, not a regular file.
  const std::string& problem() const { return problem_; }
  std::uint64_t size() const { return size_; }
  // Reads `count` bytes at `offset`; false when the file ends first.
  bool read_at(char* into, std::size_t count, std::uint64_t offset) const;

 private:
  int fd_;
  std::string problem_;
  std::uint64_t size_ = 0;
};

// Why `path` cannot be read as an input file ("" when it can): missing, a
// folder, or not a regular file (a pipe, a device).
std::string input_file_problem(const std::string& path);

// The bytes of a regular file, at most `max_bytes`. Throws std::runtime_error
// naming the file and the problem.
std::vector<char> read_input_file(const std::string& path, std::uint64_t max_bytes = kMaxInputFileBytes);

// The last `max_bytes` bytes of a regular file, or all of a shorter one; ""
// when `path` is missing or not a regular file. Opening never waits: a FIFO
// another process made there is refused, not waited on, and a link to a
// device is never read.
std::string read_regular_file_tail(const std::string& path, std::size_t max_bytes);

// A JSON file (comments allowed) of at most `max_bytes`, nesting at most
// kMaxJsonDepth deep. Throws std::runtime_error naming the file.
nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes = std::uint64_t{64} << 20);

}  // namespace commtune

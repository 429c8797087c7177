#include "core/tuner/io/input_file.h"

#include "db/json_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <stdexcept>

namespace commtune {

std::string input_file_problem(const std::string& path) {
  if (path.empty()) return "no file was named";
  return InputFile(path).problem();
}

InputFile::InputFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
  if (fd_ < 0) {
    problem_ = path + ": " + std::strerror(errno);
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    problem_ = path + ": " + std::strerror(errno);
  else if (S_ISDIR(st.st_mode))
    problem_ = path + " is a folder, not a file";
  else if (!S_ISREG(st.st_mode))
    problem_ = path + " is not a regular file (a pipe, a socket or a device)";
  else
    size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool InputFile::read_at(char* into, std::size_t count, std::uint64_t offset) const {
  while (count > 0) {
    const auto got = ::pread(fd_, into, count, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    into += got;
    count -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
  return true;
}

std::vector<char> read_input_file(const std::string& path, std::uint64_t max_bytes) {
  if (path.empty()) throw std::runtime_error("no file was named");
  const InputFile file(path);
  if (!file.problem().empty()) throw std::runtime_error(file.problem());
  const auto size = file.size();
  if (size > max_bytes)
    throw std::runtime_error(path + " is " + std::to_string(size) + " bytes, more than the " +
                             std::to_string(max_bytes) + " this file may have");
  std::vector<char> bytes(static_cast<std::size_t>(size));
  if (!file.read_at(bytes.data(), bytes.size(), 0))
    throw std::runtime_error("cannot read " + path + " to its end (" + std::to_string(size) + " bytes)");
  return bytes;
}

std::string read_regular_file_tail(const std::string& path, std::size_t max_bytes) {
  const InputFile file(path);
  if (!file.problem().empty()) return "";
  const auto size = file.size();
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(size, max_bytes));
  std::string tail(count, '\0');
  // A file that shrank meanwhile gives what was there.
  if (!file.read_at(tail.data(), count, size - count)) return "";
  return tail;
}

nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes) {
  const auto bytes = read_input_file(path, max_bytes);
  const std::string_view text(bytes.data(), bytes.size());
  auto parsed = parse_json_text(text);
  if (!parsed.problem.empty()) throw std::runtime_error(path + " is not valid JSON: " + parsed.problem);
  return std::move(parsed.json);
}

}  // namespace commtune

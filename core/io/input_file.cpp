#include "core/io/input_file.h"

#include "core/io/json_text.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace commtune {

std::string input_file_problem(const std::string& path) {
  struct stat st {};
  if (path.empty()) return "no file was named";
  if (::stat(path.c_str(), &st) != 0) return path + ": " + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return path + " is a folder, not a file";
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file (a pipe, a socket or a device)";
  return "";
}

std::vector<char> read_input_file(const std::string& path, std::uint64_t max_bytes) {
  if (const auto problem = input_file_problem(path); !problem.empty()) throw std::runtime_error(problem);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(in.tellg());
  if (size > max_bytes)
    throw std::runtime_error(path + " is " + std::to_string(size) + " bytes, more than the " +
                             std::to_string(max_bytes) + " this file may have");
  std::vector<char> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw std::runtime_error("cannot read " + path + " to its end (" + std::to_string(size) + " bytes)");
  return bytes;
}

nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes) {
  const auto bytes = read_input_file(path, max_bytes);
  const std::string_view text(bytes.data(), bytes.size());
  if (json_nesting_depth(text) > kMaxJsonDepth)
    throw std::runtime_error(path + " nests arrays or objects more than " + std::to_string(kMaxJsonDepth) +
                             " deep: not a file commtune wrote");
  auto json = parse_bounded_json(text);
  if (json.is_discarded()) throw std::runtime_error(path + " is not valid JSON");
  return json;
}

}  // namespace commtune

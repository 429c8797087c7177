// Runs a snippet under the reference interpreter (Debian's python3 with
// python3-torch) and returns its stdout parsed as JSON.
#pragma once

#include <array>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace commtune::testing {

inline nlohmann::json run_python(const std::string& code) {
  std::string path = "/tmp/commtune-oracle-XXXXXX.py";
  const int fd = ::mkstemps(path.data(), 3);
  if (fd < 0) throw std::runtime_error("cannot create a temporary file");
  FILE* f = ::fdopen(fd, "w");
  std::fputs(code.c_str(), f);
  std::fclose(f);
  const std::string command = std::string(COMMTUNE_ORACLE_PYTHON) + " " + path + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  std::string out;
  std::array<char, 4096> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe.get())) out += buffer.data();
  const int status = ::pclose(pipe.release());
  std::remove(path.c_str());
  if (status != 0) throw std::runtime_error("the reference python failed:\n" + out);
  return nlohmann::json::parse(out.substr(out.rfind('\n', out.size() - 2) + 1));
}

}  // namespace commtune::testing

#include "core/tuner/launch/worker_call.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "core/tuner/io/command.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/launcher.h"
#include "db/json_text.h"

namespace commtune {

namespace {

// A file of this process's own in the temporary folder, removed with it.
class RequestFile {
 public:
  explicit RequestFile(const nlohmann::json& request) {
    path_ = (std::filesystem::temp_directory_path() / "commtune-request-XXXXXX").string();
    const int fd = ::mkstemp(path_.data());
    if (fd < 0) throw std::runtime_error("cannot make a file for the engine's request in " + path_);
    ::close(fd);
    try {
      write_file_whole(path_, request.dump());
    } catch (...) {
      std::remove(path_.c_str());
      throw;
    }
  }
  ~RequestFile() { std::remove(path_.c_str()); }
  RequestFile(const RequestFile&) = delete;
  RequestFile& operator=(const RequestFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

nlohmann::json call_worker(const std::string& flag, const std::string& what, const nlohmann::json& request,
                           const std::vector<std::string>& args) {
  const auto worker = default_worker_path();
  std::optional<RequestFile> file;
  std::vector<std::string> argv = {worker, flag};
  if (!request.is_null()) {
    file.emplace(request);
    argv.push_back(file->path());
  }
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult result;
  try {
    result = run_command(argv, std::chrono::minutes(10));
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot ask the engine (" + worker + ") to " + what + ": " + e.what());
  }
  if (!result.ok()) throw std::runtime_error("the engine (" + worker + ") could not " + what + ": " + result.problem());
  auto parsed = parse_json_text(result.out);
  if (!parsed.problem.empty())
    throw std::runtime_error("the engine (" + worker + ") was asked to " + what + " and answered something other than JSON: " +
                             parsed.problem);
  return std::move(parsed.json);
}

}  // namespace commtune

#include "core/tuner/store/stop_requests.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include <signal.h>

#include "core/tuner/io/output_file.h"
#include "db/store.h"

namespace commtune {

namespace fs = std::filesystem;

std::string stop_request_folder(const std::string& store_path) { return store_path + ".stop"; }

namespace {

std::string sweep_file(std::int64_t sweep_id) { return "sweep-" + std::to_string(sweep_id); }

void file_request(const std::string& store_path, const std::string& name, const std::string& what) {
  const fs::path folder = stop_request_folder(store_path);
  std::error_code ec;
  fs::create_directories(folder, ec);
  try {
    if (ec) throw std::runtime_error(ec.message());
    write_file_whole(folder / name, "");
  } catch (const std::runtime_error&) {
    throw std::runtime_error("cannot ask for " + what + " to stop: cannot write in " + folder.string());
  }
}

bool withdraw(const std::string& store_path, const std::string& name) {
  std::error_code ignored;
  return fs::remove(fs::path(stop_request_folder(store_path)) / name, ignored);
}

}  // namespace

void request_stop(const std::string& store_path, std::int64_t run_id) {
  file_request(store_path, std::to_string(run_id), "run " + std::to_string(run_id));
}

void request_sweep_stop(const std::string& store_path, std::int64_t sweep_id) {
  file_request(store_path, sweep_file(sweep_id), "sweep " + std::to_string(sweep_id));
}

bool withdraw_sweep_stop_request(const std::string& store_path, std::int64_t sweep_id) {
  return withdraw(store_path, sweep_file(sweep_id));
}

bool withdraw_stop_request(const std::string& store_path, std::int64_t run_id) {
  return withdraw(store_path, std::to_string(run_id));
}

bool interrupt_owner(const std::string& owner, const std::string& program) {
  const auto me = db::this_process_owner();
  const auto first = owner.find(':');
  if (owner == me || first == std::string::npos || owner.substr(0, first) != me.substr(0, me.find(':')) ||
      !db::owner_alive(owner))
    return false;
  const long pid = std::strtol(owner.c_str() + first + 1, nullptr, 10);
  if (pid <= 0) return false;
  // Its program's name as the kernel keeps it (the first 15 characters).
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  if (!std::getline(comm, name) || name != program.substr(0, 15)) return false;
  return ::kill(static_cast<pid_t>(pid), SIGINT) == 0;
}

StopRequestWatcher::StopRequestWatcher(std::string store_path, const std::atomic<bool>* stop_all,
                                       std::chrono::milliseconds poll)
    : store_path_(std::move(store_path)), stop_all_(stop_all), poll_(poll), thread_([this] { loop(); }) {}

StopRequestWatcher::~StopRequestWatcher() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (const auto& [name, flag] : watched_) withdraw(store_path_, name);
}

void StopRequestWatcher::watch(std::int64_t run_id, std::atomic<bool>* flag) { watch_file(std::to_string(run_id), flag); }
void StopRequestWatcher::forget(std::int64_t run_id) { forget_file(std::to_string(run_id)); }
void StopRequestWatcher::watch_sweep(std::int64_t sweep_id, std::atomic<bool>* flag) {
  watch_file(sweep_file(sweep_id), flag);
}
void StopRequestWatcher::forget_sweep(std::int64_t sweep_id) { forget_file(sweep_file(sweep_id)); }

void StopRequestWatcher::watch_file(const std::string& name, std::atomic<bool>* flag) {
  std::lock_guard lock(mutex_);
  // A run watched already (a trial's next segment) keeps a request filed meanwhile.
  if (!watched_.count(name)) withdraw(store_path_, name);
  watched_[name] = flag;
  if (stop_all_ && stop_all_->load()) flag->store(true);
}

void StopRequestWatcher::forget_file(const std::string& name) {
  std::lock_guard lock(mutex_);
  watched_.erase(name);
  withdraw(store_path_, name);
}

void StopRequestWatcher::loop() {
  std::unique_lock lock(mutex_);
  while (!quit_) {
    wake_.wait_for(lock, poll_, [this] { return quit_; });
    const bool everything = stop_all_ && stop_all_->load();
    for (auto& [name, flag] : watched_)
      if (everything || withdraw(store_path_, name)) flag->store(true);
  }
}

}  // namespace commtune

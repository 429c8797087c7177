#include "core/tuner/events/event_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace commtune::events {

namespace {
constexpr auto kFlushInterval = std::chrono::milliseconds(20);
constexpr std::size_t kEagerBytes = 256 * 1024;
}  // namespace

EventWriter::EventWriter(int fd, const Hello& hello) : fd_(fd) {
  encoder_.hello(pending_, hello);
  thread_ = std::thread([this] { run(); });
}

EventWriter::~EventWriter() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  drain();
  ::close(fd_);
}

std::unique_ptr<EventWriter> EventWriter::from_environment(const Hello& hello) {
  if (const char* fd_text = std::getenv("COMMTUNE_EVENT_FD"); fd_text && *fd_text) {
    char* end = nullptr;
    const long fd = std::strtol(fd_text, &end, 10);
    if (*end != '\0' || fd < 0 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0)
      throw std::runtime_error(std::string("COMMTUNE_EVENT_FD=") + fd_text + " is not an open file descriptor");
    return std::make_unique<EventWriter>(static_cast<int>(fd), hello);
  }
  if (const char* path = std::getenv("COMMTUNE_EVENT_FILE"); path && *path) {
    std::string file(path);
    if (auto at = file.find("{rank}"); at != std::string::npos) file.replace(at, 6, std::to_string(hello.rank));
    // Its folder too, as torchrun's --log_dir is made: every rank of a job names the same new folder.
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ignored);
    // A live stream the importer follows, so written in place, but never through a symlink there.
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
      throw std::runtime_error("cannot write the event file " + file + ": " +
                               (errno == ELOOP ? std::string("it is a symlink") : std::string(std::strerror(errno))));
    return std::make_unique<EventWriter>(fd, hello);
  }
  return nullptr;
}

void EventWriter::step(const StepRecord& record) {
  bool eager;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    encoder_.step(pending_, record);
    eager = pending_.size() >= kEagerBytes;
  }
  if (eager) wake_.notify_one();
}

void EventWriter::message(const nlohmann::json& message) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    encoder_.message(pending_, message);
  }
  wake_.notify_one();
}

void EventWriter::report_error(int rank, const std::string& kind, const std::string& message_text) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (error_reported_) return;
    error_reported_ = true;
  }
  message({{"kind", "error"}, {"rank", rank}, {"error_kind", kind}, {"message", message_text}});
  drain();
}

void EventWriter::flush() { drain(); }

void EventWriter::drain() {
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  std::string out;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    out.swap(pending_);
  }
  if (broken_) return;
  std::size_t written = 0;
  while (written < out.size()) {
    const auto n = ::write(fd_, out.data() + written, out.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken_ = true;  // the launcher is gone; training goes on, reporting stops
      return;
    }
    written += static_cast<std::size_t>(n);
  }
}

void EventWriter::run() {
  std::unique_lock<std::mutex> lock(queue_mutex_);
  while (!stop_) {
    wake_.wait_for(lock, kFlushInterval);
    if (pending_.empty()) continue;
    lock.unlock();
    drain();
    lock.lock();
  }
}

}  // namespace commtune::events

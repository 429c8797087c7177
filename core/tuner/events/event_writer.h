// The worker's end of the event stream. A step only encodes into an in-memory
// buffer; a background thread writes the buffer to the launcher's socket (or
// a file) every few milliseconds, so reporting never stalls training.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/tuner/events/event_codec.h"

namespace commtune::events {

class EventWriter {
 public:
  // Writes to `fd`, which the writer owns and closes.
  EventWriter(int fd, const Hello& hello);
  ~EventWriter();  // flushes
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // The stream the environment asks for: COMMTUNE_EVENT_FD (an inherited
  // socket, set by the launcher) or COMMTUNE_EVENT_FILE (a path; "{rank}" is
  // replaced by the rank). Null when neither is set.
  static std::unique_ptr<EventWriter> from_environment(const Hello& hello);

  void step(const StepRecord& record);
  void message(const nlohmann::json& message);
  // Sends the run's error report and flushes; only the first report counts.
  void report_error(int rank, const std::string& kind, const std::string& message);
  // Blocks until everything queued so far is written.
  void flush();

 private:
  void drain();
  void run();

  int fd_;
  std::mutex queue_mutex_;  // guards pending_, encoder_, stop_
  std::mutex write_mutex_;  // serialises writes to fd_, keeping frames in order
  std::condition_variable wake_;
  std::string pending_;
  Encoder encoder_;
  bool stop_ = false;
  bool broken_ = false;
  bool error_reported_ = false;
  std::thread thread_;
};

}  // namespace commtune::events

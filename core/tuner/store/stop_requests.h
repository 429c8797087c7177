// Asking the process that records a run to stop it, from another process:
// the desktop app following a CLI sweep asks for one trial, the sweep goes
// on with the next. A request is a file, <store>.stop/<run id>, beside the
// store, so a process on another machine that shares the store's folder
// (a SLURM cluster's shared disk) can ask too; <store>.stop/sweep-<id> asks
// for a whole sweep. The recording process (`run`
// and `sweep`) watches for requests about the runs it runs and takes them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace commtune {

// The folder of a store's requests.
std::string stop_request_folder(const std::string& store_path);
// Files the request; throws std::runtime_error when it cannot.
void request_stop(const std::string& store_path, std::int64_t run_id);
// Removes a request nobody took (the run has ended, or no process watches
// it); returns whether there was one.
bool withdraw_stop_request(const std::string& store_path, std::int64_t run_id);
// The same for a whole sweep: the process running it stops it as Ctrl-C
// would (its trials stopped, the sweep cancelled and resumable). What the
// desktop app's Stop all files for a sweep another window runs.
void request_sweep_stop(const std::string& store_path, std::int64_t sweep_id);
bool withdraw_sweep_stop_request(const std::string& store_path, std::int64_t sweep_id);
// Asks the process an owner names ("host:pid:start", a sweep's or a run's)
// to stop everything it runs, as Ctrl-C in its terminal does: SIGINT, when
// it is alive on this host and is `program` (commtune-cli, which takes it as
// a cancel: a sweep ends cancelled, and can be resumed; another window of
// the app would quit). False for a process on another host, one gone, this
// one, or another program.
bool interrupt_owner(const std::string& owner, const std::string& program = "commtune-cli");

class StopRequestWatcher {
 public:
  // Looks every `poll`; `stop_all` set (Ctrl-C) sets every watched flag too.
  StopRequestWatcher(std::string store_path, const std::atomic<bool>* stop_all,
                     std::chrono::milliseconds poll = std::chrono::milliseconds(300));
  ~StopRequestWatcher();
  StopRequestWatcher(const StopRequestWatcher&) = delete;
  StopRequestWatcher& operator=(const StopRequestWatcher&) = delete;

  // A request to stop `run_id` from now on sets *flag (a request left from
  // before, for a run that ended before it was taken, is dropped).
  void watch(std::int64_t run_id, std::atomic<bool>* flag);
  // The run has ended: a request for it that came too late is dropped, as
  // are those of runs still watched when the watcher goes.
  void forget(std::int64_t run_id);
  // The same for a sweep this process runs: a request to stop it sets *flag.
  void watch_sweep(std::int64_t sweep_id, std::atomic<bool>* flag);
  void forget_sweep(std::int64_t sweep_id);

 private:
  void loop();
  void watch_file(const std::string& name, std::atomic<bool>* flag);
  void forget_file(const std::string& name);

  std::string store_path_;
  const std::atomic<bool>* stop_all_;
  std::chrono::milliseconds poll_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool quit_ = false;
  std::map<std::string, std::atomic<bool>*> watched_;  // by request file: "7" (a run), "sweep-3"
  std::thread thread_;
};

}  // namespace commtune

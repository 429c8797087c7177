// Local ranks forked from a commtune-worker that has already loaded libtorch.
//
// Loading libtorch (and the ~290 libraries Debian's build pulls in) costs a
// process about half a second of CPU before main: on 2 cores, more than a
// short trial's training. The launcher therefore starts one worker in zygote
// mode per worker binary, once per process, and asks it for each rank. The
// zygote runs no tensor op and starts no thread of its own (OpenBLAS's pool,
// started at load, is shut down across a fork by OpenBLAS), so a fork of it
// is a worker as exec would start it, but for what libraries read at load
// (libgomp's places: a pinned rank that asks for OpenMP binding is exec'd).
// Each rank is forked twice so that it ends up a child of the launcher (a
// child subreaper), which waits for it and signals it as before.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace commtune {

struct RankProcess {
  std::vector<std::string> argv;  // argv[0] is the worker binary's path
  std::vector<std::string> env;   // the whole environment, KEY=value
  std::vector<int> cpus;          // the cores it may run on; empty: any
  int events_fd = -1;             // becomes its fd 3
  int output_fd = -1;             // becomes its stdout and stderr
};

class WorkerZygote {
 public:
  // The zygote of this worker binary, started on first use; null where it
  // cannot start or COMMTUNE_WORKER_ZYGOTE=0 (then ranks are exec'd).
  static WorkerZygote* shared(const std::string& worker_path);

  ~WorkerZygote();
  WorkerZygote(const WorkerZygote&) = delete;
  WorkerZygote& operator=(const WorkerZygote&) = delete;

  // Starts a rank; returns its pid (a child of this process), or -1 when the
  // rank is to be exec'd instead: it needs more room than the zygote has, or
  // the zygote failed before it got the request (and is given up for the
  // rest of the process). Throws when the zygote got the request and did not
  // answer: the rank may exist, and is not started twice.
  pid_t spawn(const RankProcess& rank);

 private:
  WorkerZygote(pid_t pid, int control_fd) : pid_(pid), control_fd_(control_fd) {}
  void give_up();

  std::mutex mutex_;
  pid_t pid_;
  int control_fd_;
};

// The worker's zygote mode: serves spawn requests on control_fd until it
// closes; each rank runs worker_main(argc, argv) in a fork and exits with
// its result. Returns the zygote's exit status.
int serve_as_zygote(int control_fd, const std::function<int(int, char**)>& worker_main);

}  // namespace commtune

#include "core/tuner/launch/launcher.h"

#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/worker_zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>


extern char** environ;

namespace commtune {

namespace {

using steady = std::chrono::steady_clock;
constexpr std::size_t kTailLines = 40;
constexpr auto kPollInterval = std::chrono::milliseconds(50);
// A rank that diverged stops on its own after recording that step; its peers
// took part in the step's collectives and record it too, then fail at the
// next one for want of it. They get this long to do so before being stopped,
// so every rank's record of the diverged step is kept.
constexpr auto kDivergedPeerGrace = std::chrono::seconds(2);

struct Worker {
  RankOutcome outcome;
  int event_fd = -1;
  int output_fd = -1;
  events::Decoder decoder;
  std::string partial_line;
  std::deque<std::string> tail;
  bool exited = false;
  bool failure_noted = false;
  int signal_sent = 0;           // the last signal the launcher sent it
  std::int64_t last_step = -1;   // the last step it reported
  char state_at_failure = '?';   // its process state when the first failure was seen (T: stopped)
};

// The state letter of a process (R, S, D, T, Z, ...), '?' when it cannot be read.
char process_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() ? text[paren + 2] : '?';
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

// A private folder for the run's config file, removed with the object.
class RunDirectory {
 public:
  RunDirectory() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/commtune-run-XXXXXX";
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("cannot create a run folder: " + std::string(std::strerror(errno)));
    path_ = pattern;
  }
  ~RunDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class Job {
 public:
  Job(const LaunchOptions& options, const std::vector<EventSubscriber*>& subscribers)
      : options_(options), subscribers_(subscribers) {}

  RunOutcome run(const std::atomic<bool>* cancel);

 private:
  void spawn(int rank, const std::string& config_path, const std::string& store_file);
  void pump(Worker& w, bool events, int fd);
  void take_output(Worker& w, const char* data, std::size_t n);
  void reap();
  // `cancelling`: the run is being stopped on request, so a rank's
  // communication error is it noticing a peer that the stop ended.
  void note_failures(bool cancelling);
  void stop_all(int sig);
  bool all_exited() const;
  void decide(RunOutcome& outcome, bool cancelled) const;

  const LaunchOptions& options_;
  const std::vector<EventSubscriber*>& subscribers_;
  std::vector<Worker> workers_;
  std::vector<int> failure_order_;  // ranks in the order their failures were seen
  std::string abort_reason_;        // from LaunchOptions::abort_reason, once it answered
};

void Job::spawn(int rank, const std::string& config_path, const std::string& store_file) {
  int events[2], output[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, events) != 0 || ::pipe2(output, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot create worker pipes: ") + std::strerror(errno));

  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  const std::vector<std::pair<std::string, std::string>> job_env = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(options_.world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(options_.world_size)},
      {"GROUP_RANK", "0"},
      {"MASTER_ADDR", "127.0.0.1"},  // Gloo's pairs listen on loopback alone
      {"COMMTUNE_STORE_FILE", store_file},
      {"COMMTUNE_EVENT_FD", "3"},
  };
  auto overridden = [&](const std::string& entry) {
    const auto key = entry.substr(0, entry.find('='));
    for (const auto& [k, v] : job_env)
      if (k == key) return true;
    for (const auto& [k, v] : options_.env)
      if (k == key) return true;
    return key == "COMMTUNE_EVENT_FILE";
  };
  for (char** e = environ; *e; ++e)
    if (!overridden(*e)) env_strings.emplace_back(*e);
  for (const auto& [k, v] : job_env) env_strings.push_back(k + "=" + v);
  for (const auto& [k, v] : options_.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings = {options_.worker_path, "--config", config_path};
  std::vector<char*> argv;
  for (auto& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const bool pin = static_cast<std::size_t>(rank) < options_.rank_cpus.size() && !options_.rank_cpus[rank].empty();
  if (pin)
    for (int cpu : options_.rank_cpus[rank]) CPU_SET(cpu, &cpus);

  pid_t pid = -1;
  if (auto* zygote = WorkerZygote::shared(options_.worker_path))
    pid = zygote->spawn({arg_strings, env_strings, pin ? options_.rank_cpus[rank] : std::vector<int>{}, events[1],
                         output[1]});
  const pid_t parent = ::getpid();
  if (pid < 0) pid = ::fork();  // and exec the worker binary: no zygote, or it failed
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);                     // terminal signals go to the launcher, which stops workers cleanly
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and if the launcher dies, so do they
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (pin) ::sched_setaffinity(0, sizeof cpus, &cpus);  // every thread the worker starts inherits it
    if (events[1] == 3)
      ::fcntl(3, F_SETFD, 0);
    else
      ::dup2(events[1], 3);
    ::dup2(output[1], 1);
    ::dup2(output[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    static const char msg[] = "commtune-launcher: cannot execute the worker binary\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(events[1]);
  ::close(output[1]);
  set_nonblocking(events[0]);
  set_nonblocking(output[0]);
  Worker& w = workers_[rank];
  w.outcome.rank = rank;
  w.outcome.pid = pid;
  w.event_fd = events[0];
  w.output_fd = output[0];
  w.decoder = events::Decoder(rank);
}

void Job::take_output(Worker& w, const char* data, std::size_t n) {
  w.partial_line.append(data, n);
  std::size_t start = 0, end;
  while ((end = w.partial_line.find('\n', start)) != std::string::npos) {
    auto line = w.partial_line.substr(start, end - start);
    if (options_.echo_worker_output) std::fprintf(stderr, "[rank %d] %s\n", w.outcome.rank, line.c_str());
    w.tail.push_back(std::move(line));
    if (w.tail.size() > kTailLines) w.tail.pop_front();
    start = end + 1;
  }
  w.partial_line.erase(0, start);
}

void Job::pump(Worker& w, bool events, int fd) {
  char buffer[1 << 16];
  while (true) {
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // end of stream
      ::close(fd);
      (events ? w.event_fd : w.output_fd) = -1;
      if (!events && !w.partial_line.empty()) take_output(w, "\n", 1);
      return;
    }
    if (!events) {
      take_output(w, buffer, static_cast<std::size_t>(n));
      continue;
    }
    std::vector<events::Event> decoded;
    try {
      decoded = w.decoder.feed(std::string_view(buffer, static_cast<std::size_t>(n)));
    } catch (const events::ProtocolError& e) {
      w.outcome.error_kind = "runtime";
      w.outcome.error = std::string("garbled event stream: ") + e.what();
      ::close(fd);
      w.event_fd = -1;
      return;
    }
    for (const auto& event : decoded) {
      note_rank_event(w.outcome, event);
      if (const auto* step = event.step()) w.last_step = std::max(w.last_step, step->step);
      for (auto* s : subscribers_) s->on_event(event);
    }
  }
}

void Job::reap() {
  for (auto& w : workers_) {
    if (w.exited) continue;
    int status = 0;
    const pid_t r = ::waitpid(w.outcome.pid, &status, WNOHANG);
    if (r < 0 && errno == ECHILD) {  // not ours to wait for (a rank that never became our child): gone for us
      w.exited = true;
      continue;
    }
    if (r != w.outcome.pid) continue;
    w.exited = true;
    if (WIFEXITED(status)) w.outcome.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) w.outcome.signal = WTERMSIG(status);
    // Ours only if our signal ended it: a rank SIGKILLed by someone else
    // while we were stopping the job is still a failure.
    w.outcome.stopped_by_launcher = w.signal_sent != 0 && (w.outcome.signal == 0 || w.outcome.signal == w.signal_sent ||
                                                           w.outcome.signal == SIGTERM);
  }
}

void Job::note_failures(bool cancelling) {
  for (auto& w : workers_) {
    if (w.failure_noted) continue;
    bool failed = !w.outcome.error.empty() && !(cancelling && w.outcome.error_kind == "communication");
    // A rank that ran to the end through non-finite numbers (on_nonfinite=warn) has
    // a result, not a failure: its exit code says diverged.
    const bool diverged_to_end =
        w.outcome.reported_end && w.outcome.nonfinite && w.outcome.exit_code == kExitDiverged;
    if (!failed && w.exited && !w.outcome.stopped_by_launcher)
      failed = w.outcome.signal != 0 || (w.outcome.exit_code != 0 && !diverged_to_end) || !w.outcome.reported_end;
    if (failed) {
      w.failure_noted = true;
      failure_order_.push_back(w.outcome.rank);
    }
  }
}

void Job::stop_all(int sig) {
  for (auto& w : workers_) {
    if (w.exited) continue;
    w.signal_sent = sig;
    ::kill(-w.outcome.pid, sig);  // the worker's process group
    ::kill(w.outcome.pid, sig);
  }
}

bool Job::all_exited() const {
  for (const auto& w : workers_)
    if (!w.exited) return false;
  return true;
}

void Job::decide(RunOutcome& outcome, bool cancelled) const {
  if (mark_divergence(outcome)) return;
  // The root cause is the first failure that is not a communication error:
  // the others are ranks noticing that a peer went away.
  const Worker* culprit = nullptr;
  for (int rank : failure_order_) {
    const auto& w = workers_[rank];
    if (w.outcome.error_kind != "communication") {
      culprit = &w;
      break;
    }
  }
  if (!culprit && !failure_order_.empty()) {
    culprit = &workers_[failure_order_.front()];
    // Every failure is a rank noticing a peer went away or went silent. A
    // silent one is alive, reported no error and had to be stopped: blame the
    // one that fell behind first (a stopped process before a busy one).
    const Worker* silent = nullptr;
    const auto behind = [](const Worker& w) { return std::make_tuple(w.last_step, w.state_at_failure != 'T'); };
    for (const auto& w : workers_)
      if (w.outcome.error.empty() && !w.outcome.reported_end && w.outcome.stopped_by_launcher &&
          (!silent || behind(w) < behind(*silent)))
        silent = &w;
    if (silent) {
      outcome.status = RunStatus::Failed;
      outcome.failed_rank = silent->outcome.rank;
      outcome.reason = "rank " + std::to_string(silent->outcome.rank) + " stopped answering (its last step was " +
                       std::to_string(silent->last_step) +
                       (silent->state_at_failure == 'T' ? "; its process was stopped" : "") + "): rank " +
                       std::to_string(culprit->outcome.rank) + " gave up on it: " + culprit->outcome.error;
      return;
    }
  }
  if (!culprit) {
    outcome.status = cancelled ? RunStatus::Cancelled : RunStatus::Succeeded;
    if (cancelled) outcome.reason = "cancelled";
    return;
  }
  outcome.status = RunStatus::Failed;
  outcome.failed_rank = culprit->outcome.rank;
  const auto& o = culprit->outcome;
  std::string why;
  if (!o.error.empty())
    why = o.error;
  else if (o.signal)
    why = "killed by signal " + signal_name(o.signal);
  else if (o.exit_code > 0)
    why = "exited with code " + std::to_string(o.exit_code) + " without reporting an error";
  else
    why = "exited before finishing its run";
  if (o.error.empty() && !culprit->tail.empty()) why += "; its last output: " + culprit->tail.back();
  outcome.reason = "rank " + std::to_string(o.rank) + " failed: " + why;
}

RunOutcome Job::run(const std::atomic<bool>* cancel) {
  const auto started = steady::now();
  RunDirectory dir;
  const auto config_path = dir.path() + "/config.json";
  write_file_whole(config_path, options_.config.dump(2) + "\n");

  // The ranks rendezvous through a file in the run's private folder (mode
  // 0700): a local run opens no port for anyone else to reach.
  const auto store_file = dir.path() + "/rendezvous";

  workers_.resize(options_.world_size);
  try {
    for (int rank = 0; rank < options_.world_size; ++rank) spawn(rank, config_path, store_file);
  } catch (...) {
    stop_all(SIGKILL);
    for (auto& w : workers_)
      if (w.outcome.pid > 0) ::waitpid(w.outcome.pid, nullptr, 0);
    throw;
  }

  bool stopping = false, cancelled = false;
  bool term_pending = false;  // a SIGTERM to the ranks still running, due at term_at
  steady::time_point term_at{}, kill_at{};
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, bool>> owners;
    for (auto& w : workers_) {
      if (w.event_fd >= 0) {
        fds.push_back({w.event_fd, POLLIN, 0});
        owners.emplace_back(&w, true);
      }
      if (w.output_fd >= 0) {
        fds.push_back({w.output_fd, POLLIN, 0});
        owners.emplace_back(&w, false);
      }
    }
    if (fds.empty() && all_exited()) break;
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(kPollInterval.count()));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll failed: ") + std::strerror(errno));
    for (std::size_t i = 0; ready > 0 && i < fds.size(); ++i)
      if (fds[i].revents) pump(*owners[i].first, owners[i].second, fds[i].fd);
    reap();
    note_failures(stopping && cancelled);

    if (!stopping && abort_reason_.empty() && options_.abort_reason) abort_reason_ = options_.abort_reason();
    if (!stopping && (!failure_order_.empty() || !abort_reason_.empty() || (cancel && cancel->load()))) {
      cancelled = failure_order_.empty();
      for (auto& w : workers_)
        if (!w.exited) w.state_at_failure = process_state(w.outcome.pid);
      stopping = true;
      const bool diverged =
          !cancelled && workers_[static_cast<std::size_t>(failure_order_.front())].outcome.error_kind == "diverged";
      term_pending = true;
      term_at = steady::now() + (diverged ? std::chrono::duration_cast<steady::duration>(kDivergedPeerGrace)
                                          : steady::duration::zero());
    }
    if (term_pending && steady::now() >= term_at) {
      term_pending = false;
      stop_all(SIGTERM);
      kill_at = steady::now() + options_.kill_grace;
    } else if (stopping && !term_pending && steady::now() >= kill_at) {
      stop_all(SIGKILL);
      kill_at = steady::now() + std::chrono::hours(1);
    }
    // Once every worker is gone, stop waiting on pipes a grandchild might hold open.
    if (all_exited()) {
      for (auto& w : workers_) {
        if (w.event_fd >= 0) pump(w, true, w.event_fd);
        if (w.output_fd >= 0) pump(w, false, w.output_fd);
        for (int* fd : {&w.event_fd, &w.output_fd})
          if (*fd >= 0) {
            ::close(*fd);
            *fd = -1;
          }
      }
      note_failures(stopping && cancelled);
      break;
    }
  }

  RunOutcome outcome;
  for (auto& w : workers_) {
    w.outcome.output_tail.assign(w.tail.begin(), w.tail.end());
    outcome.ranks.push_back(w.outcome);
  }
  decide(outcome, cancelled);
  if (!abort_reason_.empty() && outcome.status == RunStatus::Cancelled) {
    outcome.status = RunStatus::Failed;
    outcome.reason = abort_reason_;
  }
  outcome.wall_s = std::chrono::duration<double>(steady::now() - started).count();
  return outcome;
}

}  // namespace

const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::Succeeded:
      return "succeeded";
    case RunStatus::Failed:
      return "failed";
    case RunStatus::Cancelled:
      return "cancelled";
    case RunStatus::Diverged:
      return "diverged";
  }
  return "?";
}

void note_rank_event(RankOutcome& rank, const events::Event& event) {
  const auto kind = event.kind();
  if (kind == "run_end") rank.reported_end = true;
  if (kind == "error") {
    const auto& m = *event.message();
    rank.error_kind = m.value("error_kind", "runtime");
    rank.error = m.value("message", "");
  }
  if (kind == "nonfinite" && !rank.nonfinite) {
    const auto& m = *event.message();
    rank.nonfinite = NonfiniteReport{m.value("step", std::int64_t{0}), m.value("what", "loss"), m.value("value", "nan")};
  }
  // A non-finite loss is a divergence whether or not the rank said so (a
  // stream from elsewhere may carry the numbers without the message).
  if (const auto* step = event.step(); step && !std::isfinite(step->loss) && !rank.nonfinite)
    rank.nonfinite = NonfiniteReport{step->step, "loss", std::isnan(step->loss) ? "nan" : step->loss > 0 ? "inf" : "-inf"};
}

nlohmann::json RunOutcome::nonfinite_json() const {
  for (const auto& r : ranks)
    if (status == RunStatus::Diverged && failed_rank && r.rank == *failed_rank && r.nonfinite)
      return {{"rank", r.rank}, {"step", r.nonfinite->step}, {"what", r.nonfinite->what}, {"value", r.nonfinite->value}};
  return nullptr;
}

bool mark_divergence(RunOutcome& outcome) {
  const RankOutcome* first = nullptr;
  for (const auto& r : outcome.ranks)
    if (r.nonfinite && (!first || r.nonfinite->step < first->nonfinite->step)) first = &r;
  if (!first) return false;
  outcome.status = RunStatus::Diverged;
  outcome.failed_rank = first->rank;
  const auto& n = *first->nonfinite;
  outcome.reason = "rank " + std::to_string(first->rank) + "'s " + n.what + " is " + n.value + " at step " +
                   std::to_string(n.step);
  return true;
}

nlohmann::json RunOutcome::to_json() const {
  nlohmann::json ranks_json = nlohmann::json::array();
  // Ranks of a job read from event files that never said a word (no file, no
  // pid): counted, not listed, so a file claiming 65536 ranks does not make
  // a summary of 65536 entries.
  std::int64_t never_heard = 0;
  for (const auto& r : ranks) {
    if (r.pid == 0 && r.exit_code == -1 && !r.signal && !r.reported_end && r.error.empty() && !r.nonfinite &&
        failed_rank != r.rank) {
      ++never_heard;
      continue;
    }
    nlohmann::json j{{"rank", r.rank},
                     {"pid", r.pid},
                     {"reported_end", r.reported_end},
                     {"stopped_by_launcher", r.stopped_by_launcher}};
    if (r.signal)
      j["signal"] = r.signal;
    else
      j["exit_code"] = r.exit_code;
    if (!r.error.empty()) j["error"] = {{"kind", r.error_kind}, {"message", r.error}};
    if (!r.output_tail.empty() && (r.signal || r.exit_code != 0)) j["output_tail"] = r.output_tail;
    ranks_json.push_back(std::move(j));
  }
  nlohmann::json j{{"status", to_string(status)}, {"wall_s", wall_s}, {"ranks", ranks_json}};
  if (never_heard > 0) j["ranks_never_heard_from"] = never_heard;
  if (failed_rank) j["failed_rank"] = *failed_rank;
  if (const auto n = nonfinite_json(); !n.is_null()) j["nonfinite"] = n;
  if (!reason.empty()) j["reason"] = reason;
  return j;
}

RunOutcome launch(const LaunchOptions& options, const std::vector<EventSubscriber*>& subscribers,
                  const std::atomic<bool>* cancel) {
  if (options.world_size < 1) throw std::invalid_argument("world_size must be at least 1");
  if (::access(options.worker_path.c_str(), X_OK) != 0)
    throw std::runtime_error("the worker binary " + options.worker_path + " is missing or not executable");
  Job job(options, subscribers);
  return job.run(cancel);
}

std::vector<int> allowed_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
  std::vector<int> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cores.push_back(cpu);
  return cores;
}

std::vector<std::vector<int>> split_cores(int parts, std::vector<int> cores) {
  if (parts < 1 || cores.size() < static_cast<std::size_t>(parts)) return {};
  const std::size_t share = cores.size() / static_cast<std::size_t>(parts);
  std::vector<std::vector<int>> out(parts);
  for (int r = 0; r < parts; ++r) out[r].assign(cores.begin() + r * share, cores.begin() + (r + 1) * share);
  return out;
}

std::string default_worker_path() {
  if (const char* env = std::getenv("COMMTUNE_WORKER"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "commtune-worker";
  return (self.parent_path() / "commtune-worker").string();
}

}  // namespace commtune

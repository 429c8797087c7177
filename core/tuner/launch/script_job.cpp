#include "core/tuner/launch/script_job.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include "core/tuner/io/command.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/event_files.h"

extern char** environ;

namespace commtune {

namespace {

namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

// A private folder (mode 0700) for the trial's configuration, the package, its events and logs.
class TrialFolder {
 public:
  TrialFolder() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/commtune-script-XXXXXX";
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("cannot create a trial folder: " + std::string(std::strerror(errno)));
    path_ = pattern;
  }
  ~TrialFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The last line of `path` that holds more than blanks, at most 400 characters of it.
std::string last_line(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(in.tellg());
  const std::streamoff window = std::min<std::streamoff>(size, 16384);
  in.seekg(size - window);
  std::string text(static_cast<std::size_t>(window), '\0');
  in.read(text.data(), window);
  std::string line;
  std::size_t end = text.size();
  while (end > 0) {
    const auto start = text.rfind('\n', end - 1);
    const auto from = start == std::string::npos ? 0 : start + 1;
    line = text.substr(from, end - from);
    if (line.find_first_not_of(" \t\r") != std::string::npos) break;
    line.clear();
    if (start == std::string::npos) break;
    end = start;
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line.size() > 400 ? line.substr(0, 400) + "..." : line;
}

// Each rank's stderr as torchrun's --log-dir keeps it (<run>/attempt_0/<rank>/stderr.log), by rank.
std::map<int, fs::path> rank_stderr_logs(const fs::path& log_dir) {
  std::map<int, fs::path> out;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(log_dir, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (it->path().filename() != "stderr.log") continue;
    const auto rank = it->path().parent_path().filename().string();
    if (!rank.empty() && rank.size() < 7 && rank.find_first_not_of("0123456789") == std::string::npos)
      out[std::stoi(rank)] = it->path();
  }
  return out;
}

// A line of a rank's log without the "[rank3]:" that torchrun's --tee puts before it.
std::string without_rank_prefix(std::string line) {
  static const std::regex prefix(R"(^\[(rank|default)\d+\]:\s?)");
  return std::regex_replace(line, prefix, "", std::regex_constants::format_first_only);
}

std::string signal_words(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
}

// torchrun's "Root Cause (first observed failure)": the rank and its exit
// code (negative: the signal that ended it), as torchrun 2.x prints them.
std::optional<std::pair<int, int>> root_cause(const fs::path& output) {
  std::ifstream in(output, std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(in.tellg());
  const std::streamoff window = std::min<std::streamoff>(size, 65536);
  in.seekg(size - window);
  std::string text(static_cast<std::size_t>(window), '\0');
  in.read(text.data(), window);
  const auto at = text.rfind("Root Cause");
  if (at == std::string::npos) return std::nullopt;
  static const std::regex rank(R"(\n\s*rank\s*:\s*(\d+))"), code(R"(\n\s*exitcode\s*:\s*(-?\d+))");
  std::smatch r, c;
  const std::string block = text.substr(at);
  if (!std::regex_search(block, r, rank) || !std::regex_search(block, c, code)) return std::nullopt;
  if (r[1].length() > 6 || c[1].length() > 6) return std::nullopt;
  return std::make_pair(std::stoi(r[1]), std::stoi(c[1]));
}

// What the script said last on its way out: the rank torchrun names as the
// first failure, how it ended and its stderr's last line; else the first
// rank whose stderr ends in an exception's line (ValueError: ...), else
// rank 0's last words.
std::string script_last_words(const fs::path& log_dir, const fs::path& output) {
  static const std::regex exception_line(R"(^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*)");
  const auto logs = rank_stderr_logs(log_dir);
  const auto stderr_end = [&](int rank) {
    const auto it = logs.find(rank);
    return it == logs.end() ? std::string() : without_rank_prefix(last_line(it->second));
  };
  if (const auto root = root_cause(output)) {
    const auto [rank, code] = *root;
    auto words = "rank " + std::to_string(rank) + " " +
                 (code < 0 ? "was killed by " + signal_words(-code) : "exited with code " + std::to_string(code));
    if (const auto line = stderr_end(rank); code >= 0 && !line.empty()) words += "; its stderr ends: " + line;
    return words;
  }
  std::string fallback;
  for (const auto& [rank, path] : logs) {
    const auto line = stderr_end(rank);
    if (std::regex_match(line, exception_line)) return "rank " + std::to_string(rank) + "'s stderr ends: " + line;
    if (fallback.empty() && !line.empty()) fallback = "rank " + std::to_string(rank) + "'s stderr ends: " + line;
  }
  if (!fallback.empty()) return fallback;
  const auto line = last_line(output);
  return line.empty() ? "" : "its output ends: " + line;
}

// The rank PyTorch's own teardown aborted, when that is how the script
// ended: torchrun's first failure is a rank ended by SIGABRT whose stderr
// ends in "terminate called without an active exception". The process
// group's destructor, or destroy_process_group(), can do so after Python
// comm hooks ran over Gloo (seen with PyTorch 1.13 and 2.11, a few runs in a
// hundred on a loaded machine; export_files.cpp's finish() says more).
std::optional<int> teardown_abort(const fs::path& log_dir, const fs::path& output) {
  const auto root = root_cause(output);
  if (!root || root->second != -SIGABRT) return std::nullopt;
  const auto logs = rank_stderr_logs(log_dir);
  const auto log = logs.find(root->first);
  if (log == logs.end()) return std::nullopt;
  if (without_rank_prefix(last_line(log->second)) != "terminate called without an active exception")
    return std::nullopt;
  return root->first;
}

std::string exit_words(int status) {
  if (WIFSIGNALED(status)) return "was killed by " + signal_words(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

class ScriptRun {
 public:
  ScriptRun(const ScriptLaunch& launch, const std::vector<EventSubscriber*>& subscribers)
      : launch_(launch), subscribers_(subscribers) {}
  ~ScriptRun() {
    if (pid_ > 0 && !status_) {
      stop(SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  RunOutcome run(const std::atomic<bool>* cancel);

 private:
  void write_files();
  void spawn();
  bool reap(bool block);  // whether torchrun has exited
  void stop(int sig) const {
    ::kill(-pid_, sig);  // torchrun's process group: its ranks and whatever they started
  }
  void end_process_tree(steady::duration wait_first);
  void echo_new_output();
  std::string abort_reason();

  const ScriptLaunch& launch_;
  const std::vector<EventSubscriber*>& subscribers_;
  TrialFolder folder_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::uint64_t echoed_ = 0;
};

void ScriptRun::write_files() {
  const auto& dir = folder_.path();
  write_file_whole((dir / "config.json").string(), launch_.config.dump(2) + "\n");
  fs::create_directories(dir / "python" / "commtune");
  for (const auto& [name, text] : script_package_files())
    write_file_whole((dir / "python" / "commtune" / name).string(), text);
  fs::create_directories(dir / "events");
  fs::create_directories(dir / "logs");
}

void ScriptRun::spawn() {
  const auto& dir = folder_.path();
  std::vector<std::string> args = {launch_.script.python,
                                   "-m",
                                   "torch.distributed.run",
                                   "--standalone",
                                   "--nnodes",
                                   "1",
                                   "--nproc-per-node",
                                   std::to_string(launch_.world_size),
                                   "--max-restarts",
                                   "0",
                                   "--log-dir",
                                   (dir / "logs").string(),
                                   "--tee",
                                   "2",
                                   launch_.script.path};
  for (auto& a : launch_.script.command_args(launch_.steps)) args.push_back(std::move(a));

  std::vector<std::pair<std::string, std::string>> env = {
      {"COMMTUNE_TRIAL_CONFIG", (dir / "config.json").string()},
      {"COMMTUNE_EVENT_FILE", (dir / "events" / "rank-{rank}.ctev").string()},
      {"PYTHONUNBUFFERED", "1"},  // so that what a rank printed last is in its log when it fails
  };
  const char* python_path = std::getenv("PYTHONPATH");
  env.emplace_back("PYTHONPATH", (dir / "python").string() +
                                     (python_path && *python_path ? std::string(":") + python_path : std::string()));
  if (launch_.threads > 0) env.emplace_back("OMP_NUM_THREADS", std::to_string(launch_.threads));
  for (const auto& e : launch_.env) env.push_back(e);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const auto key = entry.substr(0, entry.find('='));
    if (std::none_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == key; }) &&
        key != "COMMTUNE_EVENT_FD")
      env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);

  std::vector<char*> argv, envp;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const auto output = (dir / "output.log").string();
  const auto cwd = fs::path(launch_.script.path).parent_path().string();
  const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) throw std::runtime_error("cannot create " + output + ": " + std::strerror(errno));

  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(out);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    ::setpgid(0, 0);                     // its own group: stopping the trial reaches every process it starts
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and if the tuner dies, torchrun does (its ranks follow: python/commtune)
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execvpe(argv[0], argv.data(), envp.data());
    static const char msg[] = "commtune: cannot execute the script's Python\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here, so no signal can race the child's own call
  ::close(out);
}

bool ScriptRun::reap(bool block) {
  if (status_) return true;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r == pid_) status_ = status;
  return status_.has_value();
}

// Lets torchrun end on its own for `wait_first`, then SIGTERM to its group
// (torchrun passes it to the ranks), then SIGKILL to what is left.
void ScriptRun::end_process_tree(steady::duration wait_first) {
  const auto wait_until = [&](steady::time_point deadline) {
    while (!reap(false) && steady::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return status_.has_value();
  };
  if (!wait_until(steady::now() + wait_first)) {
    stop(SIGTERM);
    if (!wait_until(steady::now() + launch_.kill_grace)) {
      stop(SIGKILL);
      reap(true);
    }
  }
  stop(SIGKILL);  // whatever outlived torchrun in its group (a rank that ignored SIGTERM, a DataLoader worker)
}

void ScriptRun::echo_new_output() {
  if (!launch_.echo_output) return;
  std::ifstream in(folder_.path() / "output.log", std::ios::binary);
  in.seekg(static_cast<std::streamoff>(echoed_));
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto end = chunk.rfind('\n');
  if (end == std::string::npos) return;
  std::fwrite(chunk.data(), 1, end + 1, stderr);
  echoed_ += end + 1;
}

// Asked after every pass over the event files: the store's reason to stop,
// or torchrun's exit, which ends the reading once the files are read.
std::string ScriptRun::abort_reason() {
  echo_new_output();
  if (launch_.abort_reason)
    if (auto why = launch_.abort_reason(); !why.empty()) return why;
  if (!reap(false)) return "";
  auto why = "the script " + exit_words(*status_);
  if (WIFEXITED(*status_) && WEXITSTATUS(*status_) == 0) return why;
  const auto words = script_last_words(folder_.path() / "logs", folder_.path() / "output.log");
  return words.empty() ? why : why + ": " + words;
}

RunOutcome ScriptRun::run(const std::atomic<bool>* cancel) {
  const auto started = steady::now();
  write_files();
  spawn();

  EventFilesOptions options;
  options.paths = {(folder_.path() / "events").string()};
  options.follow = true;
  options.quiet_limit = std::chrono::milliseconds(static_cast<std::int64_t>(1000 * launch_.script.timeout_s));
  options.poll = std::chrono::milliseconds(100);
  options.cancel = cancel;
  options.local = true;
  std::string abort;
  options.abort_reason = [&] {
    abort = abort_reason();
    return abort;
  };
  EventFilesRun read;
  try {
    read = read_event_files(options, subscribers_);
  } catch (...) {
    end_process_tree(steady::duration::zero());
    throw;
  }
  const bool cancelled = cancel && cancel->load();
  // Every rank ended: the script is on its way out (what follows its last
  // step, a final save, gets the run's timeout). Else end it now.
  const bool ended_well = read.outcome.status == RunStatus::Succeeded || read.outcome.status == RunStatus::Diverged;
  end_process_tree(ended_well ? std::chrono::duration_cast<steady::duration>(
                                    std::chrono::milliseconds(static_cast<std::int64_t>(1000 * launch_.script.timeout_s)))
                              : steady::duration::zero());
  echo_new_output();

  auto outcome = read.outcome;
  outcome.wall_s = std::chrono::duration<double>(steady::now() - started).count();
  const std::string timeout = std::to_string(static_cast<long long>(launch_.script.timeout_s));
  if (cancelled) {
    outcome.status = RunStatus::Cancelled;
    outcome.reason = "cancelled";
  } else if (read.world_size == 0) {
    outcome.status = RunStatus::Failed;
    outcome.reason = abort.empty() ? "no rank called commtune.attach within script.timeout_s (" + timeout +
                                         " s): the script was stopped"
                     : status_ && WIFEXITED(*status_) && WEXITSTATUS(*status_) == 0
                         ? "the script ended without calling commtune.attach: attach the model with "
                           "model = commtune.attach(DistributedDataParallel(model), optimizer)"
                         : abort;
  } else if (read.world_size != launch_.world_size) {
    outcome.status = RunStatus::Failed;
    outcome.reason = "the script's ranks say they are " + std::to_string(read.world_size) + ", torchrun started " +
                     std::to_string(launch_.world_size);
  } else if (ended_well && status_ && !(WIFEXITED(*status_) && WEXITSTATUS(*status_) == 0) &&
             outcome.status == RunStatus::Succeeded) {
    // Every step is in; a script that failed after them failed (its final
    // save, its evaluation), unless PyTorch's teardown is what ended it.
    if (const auto rank = teardown_abort(folder_.path() / "logs", folder_.path() / "output.log")) {
      outcome.reason = "every rank ended its run; then PyTorch's teardown aborted rank " + std::to_string(*rank) +
                       " (\"terminate called without an active exception\"), as Gloo's process group can after "
                       "Python comm hooks: nothing the run measured is lost";
    } else {
      outcome.status = RunStatus::Failed;
      const auto words = script_last_words(folder_.path() / "logs", folder_.path() / "output.log");
      outcome.reason = "every rank ended its run, then the script " + exit_words(*status_) +
                       (words.empty() ? "" : ": " + words);
    }
  }
  // The failed rank's last words, for a reader that has only the run's record.
  const auto logs = rank_stderr_logs(folder_.path() / "logs");
  for (auto& rank : outcome.ranks) {
    const auto log = logs.find(rank.rank);
    if (log == logs.end() || !outcome.failed_rank || *outcome.failed_rank != rank.rank) continue;
    if (const auto line = without_rank_prefix(last_line(log->second)); !line.empty()) rank.output_tail = {line};
    if (rank.exit_code == -1 && status_ && WIFEXITED(*status_)) rank.exit_code = WEXITSTATUS(*status_);
  }
  return outcome;
}

std::string read_torch_version(const std::string& python) {
  CommandResult result;
  try {
    result = run_command({python, "-c", "import sys, torch; sys.stdout.write(torch.__version__)"},
                         std::chrono::seconds(120));
  } catch (const std::runtime_error& e) {
    throw ConfigError("script.python", python + " cannot be run: " + e.what());
  }
  if (result.timed_out) throw ConfigError("script.python", python + " did not import torch within 120 s");
  if (result.exit_code != 0) {
    const auto why = result.problem();
    if (why.find("No module named 'torch'") != std::string::npos)
      throw ConfigError("script.python", python + " has no torch (" + why + "): install PyTorch " +
                                             kOldestScriptTorch + " or later there, or name another Python");
    throw ConfigError("script.python", python + " cannot import torch: " + why);
  }
  const auto& version = result.out;
  static const std::regex numbers(R"(^(\d+)\.(\d+).*)");
  std::smatch m;
  if (!std::regex_match(version, m, numbers))
    throw ConfigError("script.python", python + " has a torch whose version '" + version + "' is not a version");
  const int major = std::stoi(m[1]), minor = std::stoi(m[2]);
  if (major < 2 || (major == 2 && minor < 4))
    throw ConfigError("script.python", python + " has torch " + version + ", older than " + kOldestScriptTorch +
                                           ", the oldest python/commtune supports");
  return version;
}

}  // namespace

std::string script_torch_version(const std::string& python) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;  // a sweep asks once per interpreter, not once per trial
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = known.find(python); it != known.end()) return it->second;
  }
  auto version = read_torch_version(python);
  std::lock_guard<std::mutex> lock(mutex);
  return known.emplace(python, std::move(version)).first->second;
}

void check_script(const ScriptOptions& script) {
  std::error_code error;
  if (!fs::is_regular_file(script.path, error)) throw ConfigError("script.path", script.path + " is not a file");
  if (::access(script.path.c_str(), R_OK) != 0)
    throw ConfigError("script.path", script.path + " cannot be read: " + std::strerror(errno));
  script_torch_version(script.python);
}

ScriptOptions with_absolute_paths(ScriptOptions script) {
  if (!script.path.empty()) script.path = fs::absolute(script.path).lexically_normal().string();
  // A bare name is PATH's; one with a slash is relative to this process's folder, as check_script ran it.
  if (script.python.find('/') != std::string::npos)
    script.python = fs::absolute(script.python).lexically_normal().string();
  return script;
}

RunOutcome launch_script(const ScriptLaunch& launch, const std::vector<EventSubscriber*>& subscribers,
                         const std::atomic<bool>* cancel) {
  check_script(launch.script);
  auto resolved = launch;
  resolved.script = with_absolute_paths(launch.script);
  ScriptRun run(resolved, subscribers);
  return run.run(cancel);
}

}  // namespace commtune

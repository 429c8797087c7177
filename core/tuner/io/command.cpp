#include "core/tuner/io/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace commtune {

namespace {

constexpr std::size_t kMaxStream = 1 << 20;

struct Pipe {
  std::array<int, 2> fd{-1, -1};
  Pipe() {
    if (::pipe2(fd.data(), O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    for (const int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_end(int end) {
    ::close(fd[end]);
    fd[end] = -1;
  }
};

}  // namespace

std::string CommandResult::problem() const {
  auto text = !err.empty() ? err : out;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (const auto newline = text.rfind('\n'); newline != std::string::npos) text = text.substr(newline + 1);
  if (timed_out) return "it did not answer in time" + (text.empty() ? "" : ": " + text);
  if (!text.empty()) return text;
  return exit_code < 0 ? "it was killed by a signal" : "exit status " + std::to_string(exit_code);
}

// On libc's posix_spawnp, not Boost.Process or GLib's g_spawn: both need an event loop (asio, GMainLoop) to read
// two pipes against a deadline, and a build dependency the CLI would carry, and are no faster (echo: 0.80-1.04 ms
// here, 1.02-1.07 in Boost.Process 1.74; bench/byhand/command_bench.cpp, 2026-12-02). The program runs in a
// process group of its own, so that a timeout kills it and whatever it started, and leaves no orphan.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::vector<std::pair<std::string, std::string>>& env, const std::string& cwd) {
  if (argv.empty()) throw std::invalid_argument("run_command: no program");
  Pipe out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());

  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const auto key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : env) replaced = replaced || k == key;
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings(argv);
  for (auto& s : arg_strings) args.push_back(s.data());
  args.push_back(nullptr);

  pid_t pid = 0;
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // its own group, led by it
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("cannot run " + argv[0] + ": " + std::strerror(spawned));
  out.close_end(1);
  err.close_end(1);

  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<pollfd, 2> fds{pollfd{out.fd[0], POLLIN, 0}, pollfd{err.fd[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  int open_streams = 2;
  while (open_streams > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[4096];
      const auto n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open_streams;
        continue;
      }
      if (sinks[i]->size() < kMaxStream) sinks[i]->append(buffer, static_cast<std::size_t>(n));
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace commtune

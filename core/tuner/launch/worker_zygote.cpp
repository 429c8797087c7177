#include "core/tuner/launch/worker_zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/prctl.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>

extern char** environ;

namespace commtune {

namespace {

// A request is three counts (argv, env, cores), the cores, then each string
// as its length and bytes; the two descriptors travel beside it. One message
// of a SOCK_SEQPACKET socket fits in its send buffer (~208 KB by default).
constexpr std::size_t kMaxRequestBytes = 128 * 1024;
constexpr std::uint32_t kMaxItems = 1 << 16;
constexpr int kReplyTimeoutMs = 30000;
// How long a rank waits to become the launcher's child once its first
// parent has exited (normally microseconds).
constexpr int kReparentPolls = 200000;
constexpr useconds_t kReparentPollUs = 50;

void put_u32(std::string& out, std::uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

std::string encode(const RankProcess& rank) {
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(rank.argv.size()));
  put_u32(out, static_cast<std::uint32_t>(rank.env.size()));
  put_u32(out, static_cast<std::uint32_t>(rank.cpus.size()));
  for (int cpu : rank.cpus) put_u32(out, static_cast<std::uint32_t>(cpu));
  for (const auto* list : {&rank.argv, &rank.env})
    for (const auto& s : *list) {
      put_u32(out, static_cast<std::uint32_t>(s.size()));
      out += s;
    }
  return out;
}

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::optional<std::uint32_t> u32() {
    if (data_.size() < sizeof(std::uint32_t)) return std::nullopt;
    std::uint32_t v;
    std::memcpy(&v, data_.data(), sizeof v);
    data_.remove_prefix(sizeof v);
    return v;
  }
  std::optional<std::string> string() {
    const auto size = u32();
    if (!size || *size > data_.size()) return std::nullopt;
    std::string s(data_.substr(0, *size));
    data_.remove_prefix(*size);
    return s;
  }
  bool done() const { return data_.empty(); }

 private:
  std::string_view data_;
};

// Every size is checked against what arrived before anything is allocated.
std::optional<RankProcess> decode(std::string_view data) {
  Reader in(data);
  const auto args = in.u32(), envs = in.u32(), cpus = in.u32();
  if (!args || !envs || !cpus || *args == 0 || *args > kMaxItems || *envs > kMaxItems || *cpus > kMaxItems ||
      std::size_t{*cpus} * sizeof(std::uint32_t) > data.size())
    return std::nullopt;
  RankProcess rank;
  for (std::uint32_t i = 0; i < *cpus; ++i) {
    const auto cpu = in.u32();
    if (!cpu || *cpu >= CPU_SETSIZE) return std::nullopt;
    rank.cpus.push_back(static_cast<int>(*cpu));
  }
  for (auto [list, count] : {std::pair{&rank.argv, *args}, std::pair{&rank.env, *envs}})
    for (std::uint32_t i = 0; i < count; ++i) {
      auto s = in.string();
      if (!s || s->find('\0') != std::string::npos) return std::nullopt;
      list->push_back(std::move(*s));
    }
  if (!in.done()) return std::nullopt;
  return rank;
}

// The zygote is exec'd with this much spare room in its argument and
// environment blocks, which each rank overwrites with its own: ps and
// /proc/PID/{cmdline,environ} show a rank as if it had been exec'd.
constexpr std::size_t kArgRoom = 4096;
constexpr std::size_t kEnvRoom = 64 * 1024;
constexpr const char* kEnvRoomName = "COMMTUNE_ZYGOTE_ROOM=";

struct MemoryBlock {
  char* start = nullptr;
  std::size_t size = 0;
};

// This process's /proc/self/stat, numbered as proc(5) numbers its fields
// (zero where absent); fields 48-51 bound the argument and environment blocks.
using StatFields = std::array<unsigned long, 52>;
StatFields own_stat() {
  StatFields fields{};
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  if (!f) return fields;
  char text[4096];
  const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  text[n] = '\0';
  const char* at = std::strrchr(text, ')');
  // Each field after the command's closing parenthesis follows a space.
  for (std::size_t field = 3; at && field < fields.size(); ++field) {
    at = std::strchr(at + 1, ' ');
    if (at) fields[field] = std::strtoul(at + 1, nullptr, 10);
  }
  return fields;
}

std::pair<MemoryBlock, MemoryBlock> own_blocks() {
  const auto f = own_stat();
  if (f[49] <= f[48] || f[51] <= f[50]) return {};
  return {MemoryBlock{reinterpret_cast<char*>(f[48]), f[49] - f[48]},
          MemoryBlock{reinterpret_cast<char*>(f[50]), f[51] - f[50]}};
}

std::size_t packed_size(const std::vector<std::string>& items) {
  std::size_t size = 0;
  for (const auto& item : items) size += item.size() + 1;
  return size;
}

// Writes items, each NUL-terminated, over a block they fit in (checked
// before the fork); returns the end of what was written.
char* overwrite(MemoryBlock block, const std::vector<std::string>& items) {
  std::memset(block.start, 0, block.size);
  char* at = block.start;
  for (const auto& item : items) {
    std::memcpy(at, item.c_str(), item.size() + 1);
    at += item.size() + 1;
  }
  return at;
}

// Ends the argument and environment blocks where the rank's own end, so
// /proc/PID/{cmdline,environ} hold no trailing room (PR_SET_MM_MAP needs no
// capability; where the kernel refuses it, the room reads as NULs).
void fit_blocks(char* arg_end, char* env_end) {
  const auto f = own_stat();
  std::array<__u64, 512> auxv{};
  std::size_t auxv_bytes = 0;
  if (std::FILE* in = std::fopen("/proc/self/auxv", "r")) {
    auxv_bytes = std::fread(auxv.data(), 1, sizeof auxv, in);
    std::fclose(in);
  }
  prctl_mm_map map{};
  map.start_code = f[26];
  map.end_code = f[27];
  map.start_stack = f[28];
  map.start_data = f[45];
  map.end_data = f[46];
  map.start_brk = f[47];
  map.brk = reinterpret_cast<std::uint64_t>(::sbrk(0));
  map.arg_start = f[48];
  map.arg_end = reinterpret_cast<std::uint64_t>(arg_end);
  map.env_start = f[50];
  map.env_end = reinterpret_cast<std::uint64_t>(env_end);
  map.auxv = auxv.data();
  map.auxv_size = static_cast<std::uint32_t>(auxv_bytes);
  map.exe_fd = static_cast<std::uint32_t>(-1);
  ::prctl(PR_SET_MM, PR_SET_MM_MAP, &map, sizeof map, 0);
}

// What each rank starts from, taken when the zygote started.
struct ZygoteState {
  pid_t launcher;
  std::pair<MemoryBlock, MemoryBlock> blocks;
  std::array<struct sigaction, NSIG> actions;  // as exec left them: ignored ones and libraries' handlers
};

// In the rank's process (single-threaded, a fork of the zygote's fork):
// wait to be the launcher's child, then set up what exec would have.
[[noreturn]] void become_rank(RankProcess& rank, const ZygoteState& zygote,
                              const std::function<int(int, char**)>& worker_main) {
  const pid_t launcher = zygote.launcher;
  for (int i = 0; ::getppid() != launcher; ++i) {
    if (i == kReparentPolls) ::_exit(127);
    ::usleep(kReparentPollUs);
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // as an exec'd rank: if the launcher dies, so does it
  if (::getppid() != launcher) ::_exit(127);
  ::setpgid(0, 0);  // terminal signals go to the launcher, which stops ranks cleanly
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &zygote.actions[sig], nullptr);
  if (!rank.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : rank.cpus) CPU_SET(cpu, &set);
    ::sched_setaffinity(0, sizeof set, &set);  // every thread the worker starts inherits it
  }
  // 0-3 are open in the zygote (3: its control socket), so received ones are
  // higher. Closing the rest closes what exec would (the zygote holds no
  // descriptor of a library's: it inherits from the launcher what an exec'd
  // rank would).
  ::dup2(rank.output_fd, 1);
  ::dup2(rank.output_fd, 2);
  ::dup2(rank.events_fd, 3);
  ::close_range(4, ~0U, 0);
  fit_blocks(overwrite(zygote.blocks.first, rank.argv), overwrite(zygote.blocks.second, rank.env));
  ::clearenv();
  for (auto& entry : rank.env) ::putenv(entry.data());
  std::vector<char*> argv;
  for (auto& arg : rank.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::exit(worker_main(static_cast<int>(rank.argv.size()), argv.data()));
}

// Forks the rank through a short-lived middle process, whose exit hands the
// rank to the launcher (the nearest subreaper); returns the rank's pid.
pid_t fork_rank(RankProcess& rank, const ZygoteState& zygote, const std::function<int(int, char**)>& worker_main) {
  if (packed_size(rank.argv) > zygote.blocks.first.size || packed_size(rank.env) > zygote.blocks.second.size)
    return -E2BIG;
  int pid_pipe[2];
  if (::pipe2(pid_pipe, O_CLOEXEC) != 0) return -errno;
  std::fflush(nullptr);
  const pid_t middle = ::fork();
  if (middle < 0) {
    const int error = errno;
    ::close(pid_pipe[0]);
    ::close(pid_pipe[1]);
    return -error;
  }
  if (middle == 0) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pid_pipe[0]);
      ::close(pid_pipe[1]);
      become_rank(rank, zygote, worker_main);
    }
    const pid_t reply = pid < 0 ? -errno : pid;
    (void)!::write(pid_pipe[1], &reply, sizeof reply);
    ::_exit(0);
  }
  ::close(pid_pipe[1]);
  pid_t pid = -EPIPE;
  while (::read(pid_pipe[0], &pid, sizeof pid) < 0 && errno == EINTR) {
  }
  ::close(pid_pipe[0]);
  while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
  }
  return pid;
}

struct Started {
  pid_t pid;
  int control_fd;
};

std::optional<Started> start_zygote(const std::string& worker_path) {
  int control[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) != 0) return std::nullopt;
  // Ranks forked by the zygote's children become ours when those exit.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    ::close(control[0]);
    ::close(control[1]);
    return std::nullopt;
  }
  std::string path = worker_path, flag = "--zygote", arg_room(kArgRoom, ' ');
  char* argv[] = {path.data(), flag.data(), arg_room.data(), nullptr};
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(kEnvRoomName + std::string(kEnvRoom, 'x'));
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(control[0]);
    ::close(control[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec. Its own process group keeps a
    // terminal's Ctrl-C off it; it ends when its control socket closes.
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (control[1] == 3)
      ::fcntl(3, F_SETFD, 0);
    else
      ::dup2(control[1], 3);
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  ::close(control[1]);
  return Started{pid, control[0]};
}

}  // namespace

WorkerZygote* WorkerZygote::shared(const std::string& worker_path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<WorkerZygote>> zygotes;  // null: it could not start
  if (const char* knob = std::getenv("COMMTUNE_WORKER_ZYGOTE"); knob && std::string_view(knob) == "0")
    return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  auto [at, fresh] = zygotes.try_emplace(worker_path);
  if (fresh)
    if (const auto started = start_zygote(worker_path))
      at->second.reset(new WorkerZygote(started->pid, started->control_fd));
  return at->second.get();
}

WorkerZygote::~WorkerZygote() {
  std::lock_guard<std::mutex> lock(mutex_);
  give_up();
}

void WorkerZygote::give_up() {
  if (control_fd_ < 0) return;
  ::close(control_fd_);  // the zygote's cue to exit
  control_fd_ = -1;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

pid_t WorkerZygote::spawn(const RankProcess& rank) {
  // libgomp lays out its places from the affinity it had at load, the
  // zygote's: a pinned rank that asks for OpenMP binding is exec'd.
  if (!rank.cpus.empty())
    for (const auto& entry : rank.env)
      for (const char* key : {"OMP_PROC_BIND=", "OMP_PLACES=", "GOMP_CPU_AFFINITY="})
        if (entry.rfind(key, 0) == 0) return -1;
  std::lock_guard<std::mutex> lock(mutex_);
  if (control_fd_ < 0) return -1;
  auto request = encode(rank);
  if (request.size() > kMaxRequestBytes) return -1;  // exec'd instead: more than one message holds
  iovec iov{request.data(), request.size()};
  const int fds[2] = {rank.events_fd, rank.output_fd};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
  ssize_t sent;
  while ((sent = ::sendmsg(control_fd_, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent != static_cast<ssize_t>(request.size())) {  // it never arrived: exec'd instead
    if (errno != EMSGSIZE) give_up();
    return -1;
  }
  // Once it arrived, the rank may exist: it is never exec'd a second time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReplyTimeoutMs);
  pid_t reply = -1;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd ready{control_fd_, POLLIN, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (polled < 0 && errno == EINTR) continue;
    if (polled == 1 && ::recv(control_fd_, &reply, sizeof reply, 0) == static_cast<ssize_t>(sizeof reply)) break;
    give_up();
    throw std::runtime_error("the worker zygote did not answer a spawn request (set COMMTUNE_WORKER_ZYGOTE=0 to "
                             "exec each rank)");
  }
  if (reply == -E2BIG) return -1;  // more environment than the zygote has room for: exec'd instead
  if (reply <= 0) {
    give_up();
    return -1;  // the zygote could not fork: nothing was started
  }
  return reply;
}

int serve_as_zygote(int control_fd, const std::function<int(int, char**)>& worker_main) {
  // A launcher started with a standard descriptor closed would have a
  // received descriptor land on it: keep 0-2 taken.
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
  ZygoteState zygote{::getppid(), own_blocks(), {}};
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, nullptr, &zygote.actions[sig]);
  ::signal(SIGPIPE, SIG_IGN);  // a launcher gone mid-reply ends the loop, not the zygote by signal
  std::vector<char> buffer(kMaxRequestBytes);
  while (true) {
    iovec iov{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(control_fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : 1;  // the launcher closed it, or it was never there
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        for (std::size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          fds.push_back(fd);
        }
    auto rank = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || fds.size() != 2
                    ? std::nullopt
                    : decode(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    pid_t reply = -EINVAL;
    if (rank) {
      rank->events_fd = fds[0];
      rank->output_fd = fds[1];
      reply = fork_rank(*rank, zygote, worker_main);
    }
    for (int fd : fds) ::close(fd);
    if (::send(control_fd, &reply, sizeof reply, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof reply)) return 1;
  }
}

}  // namespace commtune

// core/tuner/io/command.cpp's run_command beside the same job done with
// Boost.Process 1.74 (a process group, both pipes read by asio, a deadline
// that kills the group): time to run `echo commtune` and collect its output,
// and what a timeout leaves behind when the program has started children.
// Headers from Debian packages unpacked, not installed: apt-get download libsodium-dev libzip-dev libzip4
// libarchive-dev nlohmann-json3-dev libboost1.74-dev; dpkg -x each into /tmp/byhand/root;
// I=/tmp/byhand/root/usr/include L=/tmp/byhand/root/usr/lib/x86_64-linux-gnu; each g++ command
// below spans two lines, run from the repository's root:
//   g++ -std=c++20 -O2 -I. -I$I bench/byhand/command_bench.cpp core/tuner/io/command.cpp
//       /usr/lib/x86_64-linux-gnu/libboost_filesystem.so.1.74.0 -pthread -o /tmp/byhand/command_bench
//   /tmp/byhand/command_bench
#include <signal.h>

#include <utility>  // before Boost 1.74's asio, which uses std::exchange without it

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/process.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/tuner/io/command.h"

namespace bp = boost::process;
using namespace std::chrono_literals;

// What run_command does, with Boost.Process: no shell, stdin from /dev/null,
// stdout and stderr read at once without deadlock, the whole group killed at
// the deadline.
commtune::CommandResult boost_run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  boost::asio::io_context io;
  bp::async_pipe out_pipe(io), err_pipe(io);
  std::string out, err;
  std::vector<char> out_buf(4096), err_buf(4096);
  int open_pipes = 2;
  boost::asio::steady_timer deadline(io, timeout);
  std::function<void(bp::async_pipe&, std::vector<char>&, std::string&)> pump =
      [&](bp::async_pipe& p, std::vector<char>& b, std::string& s) {
        p.async_read_some(boost::asio::buffer(b), [&](const boost::system::error_code& ec, std::size_t n) {
          if (ec) {
            if (--open_pipes == 0) deadline.cancel();  // both at their end: the deadline is not needed
            return;
          }
          if (s.size() < (1u << 20)) s.append(b.data(), n);
          pump(p, b, s);
        });
      };
  bp::group group;
  bp::child child(bp::search_path(argv[0]), std::vector<std::string>(argv.begin() + 1, argv.end()),
                  bp::std_in < bp::null, bp::std_out > out_pipe, bp::std_err > err_pipe, group);
  pump(out_pipe, out_buf, out);
  pump(err_pipe, err_buf, err);
  bool timed_out = false;
  deadline.async_wait([&](const boost::system::error_code& ec) {
    if (ec) return;
    timed_out = true;
    std::error_code ignored;
    group.terminate(ignored);  // SIGKILL to the group
    out_pipe.close();
    err_pipe.close();
  });
  // Runs until both pipes are closed (the program and its children exited, or the deadline).
  io.run();
  child.wait();
  commtune::CommandResult r;
  r.out = out, r.err = err, r.timed_out = timed_out;
  r.exit_code = timed_out ? -1 : child.exit_code();
  return r;
}

template <class F>
double us_per_run(F run) {
  std::vector<double> us;
  for (int i = 0; i < 300; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!r.ok() || r.out != "commtune\n") std::printf("unexpected: %d [%s]\n", r.exit_code, r.out.c_str());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

static int survivors(const char* marker) {
  const std::string cmd = std::string("pgrep -f -c '^sleep [34][.]") + marker + "' > /tmp/byhand/survivors.txt";
  (void)std::system(cmd.c_str());
  FILE* f = std::fopen("/tmp/byhand/survivors.txt", "r");
  int n = 0;
  if (f && std::fscanf(f, "%d", &n) != 1) n = 0;
  if (f) std::fclose(f);
  return n;
}

int main() {
  const std::vector<std::string> echo = {"echo", "commtune"};
  std::printf("echo commtune, median of 300: run_command %.0f us, Boost.Process %.0f us\n",
              us_per_run([&] { return commtune::run_command(echo, 5s); }),
              us_per_run([&] { return boost_run(echo, 5s); }));
  // A program that starts a child holding its stdout and then hangs: killed at 300 ms (its children end
  // on their own 3-4 s later).
  const auto hang = [](const char* marker) {
    const std::string m = marker;
    return std::vector<std::string>{"sh", "-c", "sleep 3." + m + " & echo started; sleep 4." + m};
  };
  for (const auto& [who, marker] : {std::pair{"run_command", "417"}, std::pair{"Boost.Process", "418"}}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = std::string(who) == "run_command" ? commtune::run_command(hang(marker), 300ms)
                                                     : boost_run(hang(marker), 300ms);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::this_thread::sleep_for(100ms);
    std::printf("%-13s timeout 300 ms: returned after %.0f ms, timed_out %d, out [%s], processes left running: %d\n",
                who, ms, r.timed_out, r.out.substr(0, r.out.find('\n')).c_str(), survivors(marker));
  }
}

#include "core/tuner/io/command.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace commtune {
namespace {

// Whether a process is gone: no /proc entry, or a zombie nobody has reaped yet (it runs nothing).
bool gone(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

TEST(Command, ReadsBothStreamsAndTheExitStatus) {
  const auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, std::chrono::seconds(60));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(Command, ATimeoutKillsTheProgramAndWhatItStarted) {
  // The shell starts a sleep of its own in the background and names it; at the timeout both must end,
  // the background one too: a program that runs past its time leaves no orphan behind.
  const auto r = run_command({"sh", "-c", "sleep 60 & echo $!; sleep 60"}, std::chrono::milliseconds(500));
  EXPECT_TRUE(r.timed_out);
  ASSERT_FALSE(r.out.empty());
  const int background = std::stoi(r.out);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!gone(background) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(gone(background)) << "the background sleep " << background << " outlived the timeout";
  if (!gone(background)) ::kill(background, SIGKILL);
}

}  // namespace
}  // namespace commtune

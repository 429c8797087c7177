// Stop requests between processes (core/tuner/store/stop_requests.h).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/tuner/store/stop_requests.h"
#include "db/store.h"

#include <csignal>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace commtune {
namespace {

namespace fs = std::filesystem;

bool becomes_true(const std::atomic<bool>& flag) {
  for (int i = 0; i < 500 && !flag.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return flag.load();
}

class StopRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() / ("commtune-stop-" + std::to_string(::getpid()));
    fs::create_directories(folder_);
    store_ = (folder_ / "runs.db").string();
  }
  void TearDown() override { fs::remove_all(folder_); }
  fs::path folder_;
  std::string store_;
};

TEST_F(StopRequests, ARequestStopsTheWatchedRunOnlyAndIsTaken) {
  StopRequestWatcher watcher(store_, nullptr, std::chrono::milliseconds(10));
  std::atomic<bool> first{false}, second{false};
  watcher.watch(1, &first);
  watcher.watch(2, &second);
  request_stop(store_, 2);
  EXPECT_TRUE(becomes_true(second));
  EXPECT_FALSE(first.load());
  EXPECT_FALSE(fs::exists(fs::path(stop_request_folder(store_)) / "2"));
}

TEST_F(StopRequests, ASweepsRequestStopsThatSweepNotARunOfTheSameNumber) {
  // Stop all in the desktop app, for a sweep another window runs: the sweep's request stops the sweep, not
  // only its running trials, so it does not go on with the next one.
  StopRequestWatcher watcher(store_, nullptr, std::chrono::milliseconds(10));
  std::atomic<bool> sweep{false}, run{false};
  watcher.watch_sweep(4, &sweep);
  watcher.watch(4, &run);
  request_sweep_stop(store_, 4);
  EXPECT_TRUE(becomes_true(sweep));
  EXPECT_FALSE(run.load());
  EXPECT_FALSE(fs::exists(fs::path(stop_request_folder(store_)) / "sweep-4"));
  watcher.forget_sweep(4);
  request_sweep_stop(store_, 4);  // after the sweep ended: nobody takes it, and the watcher leaves none behind
  std::atomic<bool> again{false};
  watcher.watch_sweep(4, &again);  // a resumed sweep does not take a request from before
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(again.load());
}

TEST_F(StopRequests, AStaleRequestIsDroppedWhenTheRunIsWatchedAgain) {
  request_stop(store_, 3);  // for an earlier launch of run 3 that ended before anyone took it
  StopRequestWatcher watcher(store_, nullptr, std::chrono::milliseconds(10));
  std::atomic<bool> flag{false};
  watcher.watch(3, &flag);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(flag.load());
}

TEST_F(StopRequests, ARequestForAnEndedRunIsNotLeftBehind) {
  const auto file = fs::path(stop_request_folder(store_)) / "5";
  {
    StopRequestWatcher watcher(store_, nullptr, std::chrono::hours(1));  // it never looks by itself
    std::atomic<bool> five{false}, six{false};
    watcher.watch(5, &five);
    watcher.watch(6, &six);
    request_stop(store_, 5);  // came as the run ended, too late to be taken
    watcher.forget(5);
    EXPECT_FALSE(fs::exists(file));
    request_stop(store_, 6);  // run 6 was still watched when its process ended
  }
  EXPECT_FALSE(fs::exists(fs::path(stop_request_folder(store_)) / "6"));
  EXPECT_FALSE(withdraw_stop_request(store_, 6));
}

TEST_F(StopRequests, ARequestBetweenTwoSegmentsOfATrialCounts) {
  StopRequestWatcher watcher(store_, nullptr, std::chrono::milliseconds(10));
  std::atomic<bool> flag{false};
  watcher.watch(7, &flag);
  request_stop(store_, 7);
  watcher.watch(7, &flag);  // the trial's next segment starts before the watcher looked
  EXPECT_TRUE(becomes_true(flag));
}

TEST_F(StopRequests, WithdrawingSaysWhetherThereWasARequest) {
  EXPECT_FALSE(withdraw_stop_request(store_, 8));
  request_stop(store_, 8);
  EXPECT_TRUE(withdraw_stop_request(store_, 8));
  EXPECT_FALSE(fs::exists(fs::path(stop_request_folder(store_)) / "8"));
}

TEST_F(StopRequests, StoppingEverythingSetsEveryWatchedFlag) {
  std::atomic<bool> all{false}, flag{false};
  StopRequestWatcher watcher(store_, &all, std::chrono::milliseconds(10));
  watcher.watch(4, &flag);
  all = true;
  EXPECT_TRUE(becomes_true(flag));
}

TEST_F(StopRequests, AFolderThatCannotBeWrittenIsAnError) {
  EXPECT_THROW(request_stop("/proc/no-such/runs.db", 1), std::runtime_error);
}

// Stop all for a sweep another process runs on this host: Ctrl-C, as its terminal gives it.
TEST(InterruptOwner, InterruptsALiveProcessOnThisHostAndNothingElse) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    const auto owner = db::this_process_owner();
    if (::write(pipe_fds[1], owner.data(), owner.size()) < 0) ::_exit(2);
    ::close(pipe_fds[1]);
    for (int i = 0; i < 600; ++i) ::usleep(100000);  // a minute at most
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char buffer[512];
  const auto n = ::read(pipe_fds[0], buffer, sizeof buffer);
  ::close(pipe_fds[0]);
  ASSERT_GT(n, 0);
  const std::string owner(buffer, static_cast<std::size_t>(n));
  std::string program;  // the child is this test program
  std::getline(std::ifstream("/proc/self/comm"), program);
  EXPECT_FALSE(interrupt_owner(db::this_process_owner(), program));  // never this process
  EXPECT_FALSE(interrupt_owner("another-host.example:" + std::to_string(child) + ":1", program));
  EXPECT_FALSE(interrupt_owner(owner.substr(0, owner.rfind(':')) + ":0", program));  // its pid, another start: gone
  EXPECT_FALSE(interrupt_owner(owner));  // not commtune-cli (another window of the app would quit)
  EXPECT_TRUE(interrupt_owner(owner, program));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_FALSE(interrupt_owner(owner, program));  // gone now
}

}  // namespace
}  // namespace commtune

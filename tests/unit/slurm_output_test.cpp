// Why a SLURM job ended, from its output file (core/tuner/launch/slurm_job.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/tuner/launch/slurm_job.h"

namespace commtune {
namespace {

namespace fs = std::filesystem;

class SlurmOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() / ("commtune-slurm-output-" + std::to_string(::getpid()));
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  std::string ending_of(const std::string& output) {
    std::ofstream(folder_ / "slurm-7.out", std::ios::binary) << output;
    return slurm_output_ending(folder_.string(), "7");
  }
  fs::path folder_;
};

TEST_F(SlurmOutput, ARanksErrorSaysMoreThanSrunsReportOfIt) {
  EXPECT_EQ(ending_of("step 10\nworker: error: the data file is truncated\nsrun: error: node1: task 0: Exited with "
                      "exit code 1\nsrun: Terminating StepId=7.0\n"),
            "worker: error: the data file is truncated; then srun: error: node1: task 0: Exited with exit code 1");
  EXPECT_EQ(ending_of("worker: error: the data file is truncated\nsrun: Job step aborted\n"),
            "worker: error: the data file is truncated");
}

TEST_F(SlurmOutput, AStepSrunCouldNotLaunchIsNamedAfterAnEarlierAttemptsLastLine) {
  // A requeued job appends its new attempt's output to the old one's.
  EXPECT_EQ(ending_of("slurmstepd-node1: error: *** JOB 7 ON node1 CANCELLED DUE TO JOB REQUEUE ***\n"
                      "srun: error: Unable to create step for job 7: Job/step already completing or completed\n"),
            "slurmstepd-node1: error: *** JOB 7 ON node1 CANCELLED DUE TO JOB REQUEUE ***; then srun: error: Unable "
            "to create step for job 7: Job/step already completing or completed");
  EXPECT_EQ(ending_of("srun: error: Unable to create step for job 7: Invalid generic resource specification\n"),
            "srun: error: Unable to create step for job 7: Invalid generic resource specification");
}

TEST_F(SlurmOutput, NoOutputOrNoFileSaysNothing) {
  EXPECT_EQ(ending_of(""), "");
  EXPECT_EQ(ending_of("srun: Job 7 step creation temporarily disabled, retrying\n"), "");
  EXPECT_EQ(slurm_output_ending(folder_.string(), "8"), "");
}

// The job's folder is the user's: what is there under the output's name is
// read only as far as a regular file's last 4 KiB, and never waited on
// (a FIFO would block the sweep in open(), where no signal could stop it).
TEST_F(SlurmOutput, AFifoOrADeviceInPlaceOfTheOutputSaysNothingAndDoesNotWait) {
  ASSERT_EQ(::mkfifo((folder_ / "slurm-9.out").c_str(), 0600), 0);
  EXPECT_EQ(slurm_output_ending(folder_.string(), "9"), "");
  fs::create_symlink("/dev/zero", folder_ / "slurm-10.out");
  EXPECT_EQ(slurm_output_ending(folder_.string(), "10"), "");
  fs::create_symlink(folder_, folder_ / "slurm-11.out");
  EXPECT_EQ(slurm_output_ending(folder_.string(), "11"), "");
}

TEST_F(SlurmOutput, AHugeOutputIsReadFromItsEnd) {
  const auto path = folder_ / "slurm-12.out";
  {
    std::ofstream out(path, std::ios::binary);
    out.seekp((std::int64_t{2} << 30) - 1);  // a sparse 2 GiB of zeros, then the last line
    out << "\nworker: error: out of memory\n";
  }
  EXPECT_EQ(slurm_output_ending(folder_.string(), "12"), "worker: error: out of memory");
}

}  // namespace
}  // namespace commtune

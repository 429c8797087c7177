// What the CLI's commands share: exit codes, Ctrl-C, the run store, and
// plain-text tables.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/launch/launcher.h"
#include "core/store/run_metrics.h"
#include "db/store.h"
#include "db/writer.h"

namespace commtune::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitConfig = 2;
constexpr int kExitCancelled = 130;
// and commtune::kExitDiverged (3) for a diverged run

// The exit code for how a run ended.
int exit_code_for(const RunOutcome& outcome);

// A raw configuration: the file's (when given), then each path=value override.
nlohmann::json load_raw_config(const std::string& path, const std::vector<std::string>& overrides);

// Set by SIGINT, SIGTERM and SIGHUP once watch_stop_signals() ran.
extern std::atomic<bool> g_stop;
void watch_stop_signals();

// The store at `path` (default_store_path() when empty). Readers get a
// read-write connection when they can (it migrates an old file and marks
// dead runs interrupted), a read-only one otherwise.
std::string store_path(const std::string& path);
std::unique_ptr<db::Store> open_store(const std::string& path);
std::unique_ptr<db::Writer> open_writer(const std::string& path);

// Columns separated by two spaces; numbers right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format(const char* printf_format, double value);
std::string format_optional(const char* printf_format, const std::optional<double>& value, const char* missing = "-");
std::string format_time(double unix_seconds);

// Run ids named on the command line, or the trials of a sweep, or the newest runs.
std::vector<std::int64_t> select_runs(const db::Store& store, const std::vector<std::int64_t>& run_ids,
                                      std::optional<std::int64_t> sweep_id);

// A stored run as JSON: its record (and its configuration and summary when
// `full`); a sweep with its trials' statuses; a digest's numbers.
nlohmann::json run_json(const db::RunRecord& run, bool full);
nlohmann::json sweep_json(const db::Store& store, const db::SweepRecord& sweep);
nlohmann::json digest_json(const RunDigest& digest);

// A number from a run summary at a JSON pointer ("/step_time_ms/median"), if
// there (figure_json's "nan" and "inf" too).
std::optional<double> summary_number(const nlohmann::json& summary, const char* pointer);

}  // namespace commtune::cli

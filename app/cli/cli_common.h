// What the CLI's commands share: exit codes, Ctrl-C, the run store, and
// plain-text tables.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/tuner/launch/launcher.h"
#include "core/tuner/store/run_metrics.h"
#include "db/store.h"
#include "db/writer.h"

namespace commtune::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitConfig = 2;
// and commtune::kExitDiverged (3) for a diverged run; a cancelled one exits
// with cancelled_exit_code().

// The exit code for how a run ended.
int exit_code_for(const RunOutcome& outcome);

// Set by SIGINT, SIGTERM and SIGHUP (SIGHUP not when it was ignored, as
// under nohup). install_stop_signals() runs first thing in main, so a
// signal is never lost, even one sent while the process starts (a
// background job starts with SIGINT ignored); until a command claims the
// signals with watch_stop_signals(), a signal ends the process at once
// (exit status 128 + the signal). A command that claims them checks g_stop
// and stops what it started.
extern std::atomic<bool> g_stop;
void install_stop_signals();
void watch_stop_signals();
// 128 + the signal that stopped this process (130 for SIGINT, 143 for
// SIGTERM), as a shell reports a program that signal ended; 130 when a stop
// request (the desktop app's Stop) did.
int cancelled_exit_code();

// The store at `path` (default_store_path() when empty). Readers get a
// read-write connection when they can (it migrates an old file and marks
// dead runs interrupted), a read-only one otherwise.
std::string store_path(const std::string& path);
// Why `path` cannot be a run store ("" when it can): empty, a folder, a
// device or pipe. Checked for --db and $COMMTUNE_DB before SQLite sees it.
std::string store_file_problem(const std::string& path);
// Why a file cannot be written at `path` ("" when it can): a folder, or a
// folder that does not exist or is not writable. For output options, checked
// before a run starts rather than after it ends.
std::string output_file_problem(const std::string& path);

// A number option's check: a finite number from `low` to `high` (`low`
// itself excluded when `above`), saying what it wants. CLI11's own ranges
// let NaN through and print the whole double range.
CLI::Validator number_between(double low, double high, bool above = false);
std::unique_ptr<db::Store> open_store(const std::string& path);
std::unique_ptr<db::Writer> open_writer(const std::string& path, const db::WriterOptions& options = {});

// Columns separated by two spaces; numbers right-aligned.
class Table {
 public:
  // A cell longer than this many characters is cut, ending in "...": one long
  // run name must not pad every row of a listing. The last column pads
  // nothing, so it is kept whole (a reason: "excluded: ...").
  static constexpr std::size_t kMaxCellChars = 60;

  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // Cells are shown through printable(): text from the store cannot drive the terminal.
  void add(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` with what could drive or mislead a terminal written out as escapes:
// control characters (ESC, BEL, newlines, DEL) as \x1b, \n and the like; C1
// controls, bidirectional overrides and isolates, and line separators as
// \u202e and the like; bytes that are not UTF-8 as \xff. Run names, reasons
// and configuration files come from a shared store or another person.
std::string printable(std::string_view text);

// `--script FILE [--python PATH] [--nproc-per-node N] [--steps-arg NAME] [-- ARGS...]`,
// which `run` and `sweep` take: the user's own training script as the job.
struct ScriptArgs {
  std::string path, python, steps_arg;
  std::optional<std::int64_t> nproc_per_node;
  std::vector<std::string> argv;  // after --
};
void add_script_options(CLI::App& command, ScriptArgs& args);
// Puts them into a raw configuration (its script section and world_size).
// Throws ConfigError when a script option comes without --script.
void apply_script_args(nlohmann::json& raw, const ScriptArgs& args);

// null, or the value (a double as figure_json writes it).
nlohmann::json optional_json(const std::optional<std::int64_t>& v);
nlohmann::json optional_json(const std::optional<double>& v);

// JSON as text, for output: bytes that are not UTF-8 (a store row from
// elsewhere) become U+FFFD instead of an exception.
std::string json_text(const nlohmann::json& value, int indent = -1);
// A JSON array of `count` elements, written to `out` as json_text(array, 2)
// would write it `depth` levels deep, a block at a time: the 10^5 rows of
// `list` or `compare --sweep` are never one tree. `element` is called on
// several threads at once.
void write_json_array(std::ostream& out, std::size_t count, const std::function<nlohmann::json(std::size_t)>& element,
                      int depth = 0);
// `head` with the array `key` added, as json_text(object, 2) writes it
// (std::logic_error when `head` holds `key` already).
void write_json_object_and_array(std::ostream& out, const nlohmann::json& head, const std::string& key,
                                 std::size_t count, const std::function<nlohmann::json(std::size_t)>& element);

std::string format(const char* printf_format, double value);
std::string format_optional(const char* printf_format, const std::optional<double>& value, const char* missing = "-");
std::string format_time(double unix_seconds);

// Run ids named on the command line, or the trials of a sweep, or the newest runs.
std::vector<std::int64_t> select_runs(const db::Store& store, const std::vector<std::int64_t>& run_ids,
                                      std::optional<std::int64_t> sweep_id);

// A stored run as JSON: its record (and its configuration and summary when
// `full`); a sweep with its trials' statuses.
nlohmann::json run_json(const db::RunRecord& run, bool full);
nlohmann::json sweep_json(const db::Store& store, const db::SweepRecord& sweep);

// A number from a run summary at a JSON pointer ("/step_time_ms/median"), if
// there (figure_json's "nan" and "inf" too).
std::optional<double> summary_number(const nlohmann::json& summary, const char* pointer);

}  // namespace commtune::cli

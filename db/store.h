// The run store: every run, sweep, per-step metric, hook statistic, event and
// exported file, in one SQLite file. Typed reads and writes over one
// connection; db::Writer feeds it from a background thread during runs, and
// any number of readers (the GUI, the CLI) open their own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "db/config_check.h"
#include "db/sqlite.h"

namespace commtune::db {

// A run's life: pending (planned by a sweep) -> running -> one of the ends.
// paused: a sweep stopped it at a rung and may continue it; stopped: early
// stopping ended it for good; interrupted: the process that ran it died.
namespace status {
inline constexpr const char* kPending = "pending";
inline constexpr const char* kRunning = "running";
inline constexpr const char* kPaused = "paused";
inline constexpr const char* kSucceeded = "succeeded";
inline constexpr const char* kFailed = "failed";
inline constexpr const char* kDiverged = "diverged";  // a loss or gradient norm went NaN or infinite
inline constexpr const char* kCancelled = "cancelled";
inline constexpr const char* kInterrupted = "interrupted";
inline constexpr const char* kStopped = "stopped";
// Whether a run (or sweep) with this status has ended for good or for now.
bool is_end(const std::string& status);
}  // namespace status

// A trial's number wherever a person reads it (the sweep's log, list, show,
// their JSON, the app's pages): 1, 2, ... in the sweep's order, baselines and
// seeds counted. The store keeps the index, from 0.
inline std::int64_t trial_number(std::int64_t index) { return index + 1; }

struct NewRun {
  std::optional<std::int64_t> sweep_id;
  std::optional<std::int64_t> trial;  // the index (from 0)
  std::string name;
  nlohmann::json config;  // complete and validated
  std::int64_t world_size = 0;
  std::int64_t steps_requested = 0;
  std::string fingerprint;
};

struct RunRecord {
  std::int64_t id = 0;
  std::optional<std::int64_t> sweep_id;
  std::optional<std::int64_t> trial;  // the index (from 0); people read trial_number()
  std::string name;
  nlohmann::json config;       // checked by the installed check (db/config_check.h); {} when it failed
  std::string config_problem;  // why the stored configuration is not one ("" when it is)
  std::string status;
  std::string host;
  std::string owner;
  std::int64_t world_size = 0;
  std::int64_t steps_requested = 0;
  std::int64_t steps_completed = 0;
  std::string fingerprint;
  double created_at = 0;
  std::optional<double> started_at;
  std::optional<double> finished_at;
  double wall_s = 0;
  std::optional<double> final_loss;
  std::string reason;
  nlohmann::json summary;  // null until the run ends, and unless read `with_summary`
  std::string tags;        // the user's, comma-separated
  std::string notes;
  // The figures stored when the run last ended (core/tuner/store/run_metrics.h's
  // RunDigest as JSON); null while it runs, before it ended once, when the
  // stored text is no JSON, or when read without it (RunFilter::with_digest).
  nlohmann::json digest;

  std::optional<std::int64_t> trial_number() const {
    return trial ? std::optional<std::int64_t>(db::trial_number(*trial)) : std::nullopt;
  }
};

// How a run (or one launch of it) ended.
struct RunEnd {
  std::string status;
  std::string reason;
  std::int64_t steps_completed = 0;
  std::optional<double> final_loss;
  double wall_s = 0;  // of the whole run, all launches together
  nlohmann::json summary;
  nlohmann::json digest;  // the run's figures from its stored steps (RunRecord::digest); null: none
  // Its steady steps' profile, encoded (core/tuner/netmodel/run_samples.h): what
  // predictions read instead of its steps. Empty: none.
  std::string samples;
};

struct SweepRecord {
  std::int64_t id = 0;
  std::string name;
  nlohmann::json spec;
  std::string status;
  std::string owner;
  double created_at = 0;
  std::optional<double> finished_at;
};

struct RunFilter {
  std::optional<std::int64_t> sweep_id;
  std::vector<std::string> statuses;  // any of these
  // Parameter conditions, all of which must hold: name (e.g.
  // hook.matrix_approximation_rank) equal to the value given as text.
  std::vector<std::pair<std::string, std::string>> params;
  std::string order_by = "id";  // id, created, name, status, steps, final_loss, wall
  bool descending = false;
  std::int64_t limit = 0;  // 0: all
  // The run summary (a few KB of JSON each) is read only when asked: only
  // `show` prints it, and parsing it was a third of `list` at 10^5 trials.
  bool with_summary = false;
  // The stored figures (RunRecord::digest): a reader that shows none of
  // them (`list`) leaves them unparsed.
  bool with_digest = true;
};

// One rank's step: the columns of step_metrics.
struct StepRow {
  std::int64_t run_id = 0;
  std::int32_t rank = 0;
  std::int64_t step = 0;
  double wall_s = 0;  // since the run started, when the launcher received it
  double loss = 0;
  double lr = 0;
  double t_data = 0, t_forward = 0, t_backward = 0, t_comm_wait = 0, t_hook = 0, t_optimizer = 0, t_step = 0;
  std::uint64_t wire_bytes = 0;
  std::uint64_t uncompressed_bytes = 0;
};

inline constexpr std::int32_t kWholeStep = -1;  // the bucket of a statistic about the whole step

struct StatRow {
  std::int64_t run_id = 0;
  std::int64_t stat_id = 0;  // from Store::stat_id
  std::int32_t bucket = kWholeStep;
  std::int32_t rank = 0;
  std::int64_t step = 0;
  double value = 0;
};

struct EventRow {
  std::int64_t run_id = 0;
  std::int32_t rank = 0;
  double time = 0;  // Unix seconds
  std::string kind;
  nlohmann::json body;
};

struct Artifact {
  std::int64_t run_id = 0;
  std::string kind;  // checkpoint, export, ...
  std::string path;
  double created_at = 0;
};

// A statistic's values in one run: (rank, step, bucket, value).
struct StatPoint {
  std::int32_t rank = 0;
  std::int64_t step = 0;
  std::int32_t bucket = kWholeStep;
  double value = 0;
};

// Per step, the mean over the ranks that reported it. A figure is missing
// (nullopt) when a rank's value is: NULL or no number in the store, or a
// negative time or byte count (sql_mean_of_reals, sql_mean_of_measures).
struct CurvePoint {
  std::int64_t step = 0;
  double wall_s = 0;
  std::optional<double> loss;  // NaN when a rank's was
  std::optional<double> t_step;
  std::optional<double> wire_bytes;
  std::optional<double> uncompressed_bytes;
  int ranks = 0;
};

class Store {
 public:
  using Access = Connection::Access;
  // Pages: before anything is written, every page of the file is checked
  // (PRAGMA quick_check, about 0.2 s per 100 MB here), and a damaged file
  // is refused (db::Error, SQLITE_CORRUPT) untouched. The Writer, which
  // records runs, opens so; commands that write a row or two do not.
  enum class Check { None, Pages };
  // ReadWrite creates the file, migrates an older schema and marks runs
  // whose process died as interrupted; ReadOnly needs a store of the current
  // version and never writes.
  explicit Store(const std::string& path, Access access = Access::ReadWrite, Check check = Check::None);

  const std::string& path() const { return connection_.path(); }
  Connection& connection() { return connection_; }

  // Sweeps
  std::int64_t create_sweep(const std::string& name, const nlohmann::json& spec);
  // Sets the status; the end time too when it is an end.
  void set_sweep_status(std::int64_t sweep_id, const std::string& status);
  // Claims a sweep for this process (resuming it), marking it running;
  // throws Error when another live process runs it. One step: of two
  // processes claiming at once, one wins.
  void claim_sweep(std::int64_t sweep_id);
  std::optional<SweepRecord> sweep(std::int64_t sweep_id) const;
  std::vector<SweepRecord> sweeps() const;
  // How many of a sweep's trials have each status, counted in SQL.
  std::map<std::string, std::int64_t> trial_statuses(std::int64_t sweep_id) const;
  void rename_sweep(std::int64_t sweep_id, const std::string& name);
  // Deletes a sweep that is not running, with its runs and their metrics.
  void delete_sweep(std::int64_t sweep_id);

  // Runs
  std::int64_t create_run(const NewRun& run, const std::string& status = status::kRunning);
  // Gives a pending run (a TPE trial drawn as it starts) its name and
  // configuration; its sweep and trial number stay.
  void plan_pending_run(std::int64_t run_id, const NewRun& run);
  // Marks a run running in this process (for its first or a later launch).
  void start_run(std::int64_t run_id);
  void finish_run(std::int64_t run_id, const RunEnd& end);
  void set_run_status(std::int64_t run_id, const std::string& status, const std::string& reason = "");
  std::optional<RunRecord> run(std::int64_t run_id, bool with_summary = false) const;
  std::vector<RunRecord> runs(const RunFilter& filter = {}) const;
  std::vector<std::int64_t> run_ids(const RunFilter& filter = {}) const;  // the same runs, ids only
  std::vector<RunRecord> runs(const std::vector<std::int64_t>& ids) const;  // those stored, in this order
  // Each run's stored step profile (RunEnd::samples), in the order of `ids`;
  // "" for a run without one (running, ended before version 6, not stored).
  std::vector<std::string> stored_samples(const std::vector<std::int64_t>& ids) const;
  // Changes when a run is added, renamed or removed or its status changes
  // (not with every step): a list view polls it to know when to read again.
  std::string runs_signature() const;
  void rename_run(std::int64_t run_id, const std::string& name);
  // Tags are normalised: trimmed, empty ones dropped, joined by ", ".
  void annotate_run(std::int64_t run_id, const std::string& tags, const std::string& notes);
  // Deletes a run that is not running, with its metrics, statistics, events and artifacts' rows.
  void delete_run(std::int64_t run_id);

  // Metrics
  std::int64_t stat_id(const std::string& name);
  void insert(const StepRow& row);
  void insert(const StatRow& row);
  void insert(const EventRow& row);
  void add_artifact(std::int64_t run_id, const std::string& kind, const std::string& path);

  // Rows of every rank (or one), from `from_step` on (a live view reads only what is new).
  std::vector<StepRow> steps(std::int64_t run_id, std::optional<std::int32_t> rank = std::nullopt,
                             std::int64_t from_step = 0) const;
  std::vector<CurvePoint> curve(std::int64_t run_id) const;
  std::vector<StatPoint> stat(std::int64_t run_id, const std::string& name) const;
  std::vector<std::string> stat_names(std::int64_t run_id) const;
  // Each per-bucket statistic's value at the newest step `rank` stored it:
  // (name, and in StatPoint the rank, that step, the bucket and the value).
  std::vector<std::pair<std::string, StatPoint>> latest_bucket_stats(std::int64_t run_id, std::int32_t rank = 0) const;
  std::vector<EventRow> events(std::int64_t run_id, const std::string& kind = "") const;
  // One member of the body of a run's newest event of `kind` ("link_probe"
  // of "run_start"), read without parsing the rest; null when there is none.
  // `member` is a plain key: no quotes, dots or backslashes.
  nlohmann::json last_event_member(std::int64_t run_id, const std::string& kind, const std::string& member) const;
  std::vector<Artifact> artifacts(std::int64_t run_id) const;
  std::int64_t count_steps(std::int64_t run_id) const;
  // The mean loss over the ranks that stored `step` (nullopt when none did).
  std::optional<double> loss_at_step(std::int64_t run_id, std::int64_t step) const;
  // Steps stored for every rank of the run: the least, over its ranks, of
  // the highest stored step + 1 (0 when a rank has none).
  std::int64_t steps_of_every_rank(std::int64_t run_id) const;

  // Runs and sweeps left running by a process that is gone (killed, crashed)
  // become interrupted. Returns how many runs changed.
  int mark_orphans_interrupted();

 private:
  // The runs a filter selects, in its order: `columns` of each, bound and ready to step.
  Statement select_runs(const char* columns, const RunFilter& filter) const;
  // The stored runs of `ids`, in this order, their configurations checked.
  std::vector<RunRecord> read_runs(const std::vector<std::int64_t>& ids, bool with_summary, bool with_digest) const;

  Connection connection_;
  int version_ = 0;        // the file's schema version (older than this build's only when read-only)
  std::string run_by_id_;  // the statement that reads a run's row, for that version
  std::optional<Statement> insert_step_, insert_stat_, insert_event_;
  std::optional<Statement> find_stat_, add_stat_;
};

// $XDG_DATA_HOME/commtune, else ~/.local/share/commtune (else ./commtune). Creates it.
std::filesystem::path user_data_folder();
// $COMMTUNE_DB, else user_data_folder()/runs.db.
std::string default_store_path();

// "host:pid:start-time" of this process: who runs a run or a sweep.
std::string this_process_owner();
// Whether the owner is a live process on this host; owners on other hosts
// count as alive (nothing here can tell).
bool owner_alive(const std::string& owner);

double unix_now();

}  // namespace commtune::db

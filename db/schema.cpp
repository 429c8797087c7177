#include "db/schema.h"

#include <vector>

namespace commtune::db {

namespace {

// Version 1: sweeps, runs with their configuration as JSON, per-step metrics,
// hook statistics, the event log and artifacts.
constexpr const char* kVersion1 = R"sql(
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  spec TEXT NOT NULL CHECK (json_valid(spec)),
  status TEXT NOT NULL,
  owner TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL,
  finished_at REAL
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER REFERENCES sweeps(id) ON DELETE CASCADE,
  trial INTEGER,
  name TEXT NOT NULL DEFAULT '',
  config TEXT NOT NULL CHECK (json_valid(config)),
  status TEXT NOT NULL,
  host TEXT NOT NULL,
  owner TEXT NOT NULL DEFAULT '',
  world_size INTEGER NOT NULL,
  steps_requested INTEGER NOT NULL,
  steps_completed INTEGER NOT NULL DEFAULT 0,
  fingerprint TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL,
  started_at REAL,
  finished_at REAL,
  wall_s REAL NOT NULL DEFAULT 0,
  final_loss REAL,
  reason TEXT NOT NULL DEFAULT '',
  summary TEXT,
  UNIQUE (sweep_id, trial)
);
CREATE INDEX runs_by_status ON runs(status);
CREATE TABLE step_metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  wall_s REAL NOT NULL,
  loss REAL,
  lr REAL,
  t_data REAL,
  t_forward REAL,
  t_backward REAL,
  t_comm_wait REAL,
  t_hook REAL,
  t_optimizer REAL,
  t_step REAL,
  wire_bytes INTEGER,
  uncompressed_bytes INTEGER,
  PRIMARY KEY (run_id, rank, step)
) WITHOUT ROWID;
CREATE TABLE stat_names (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);
CREATE TABLE step_stats (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  stat_id INTEGER NOT NULL REFERENCES stat_names(id),
  bucket INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, stat_id, bucket, rank, step)
) WITHOUT ROWID;
CREATE TABLE run_events (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  time REAL NOT NULL,
  kind TEXT NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX run_events_by_run ON run_events(run_id, kind);
CREATE TABLE artifacts (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  created_at REAL NOT NULL,
  UNIQUE (run_id, kind, path)
);
)sql";

// Version 2: every leaf of a run's configuration as a typed row, so runs can
// be filtered and compared by parameter (and sweeps find their axes) in SQL.
// Existing runs are backfilled from their stored configuration.
std::string version2() {
  return R"sql(
CREATE TABLE run_params (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE INDEX run_params_by_name ON run_params(name, value);
)sql" + fill_run_params_sql("SELECT id, config FROM runs") +
         ";\n";
}

// Version 3: a run's tags (comma-separated) and free-text notes, set by the user.
constexpr const char* kVersion3 = R"sql(
ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
)sql";

// Version 4: a run's digest, the figures every listing and comparison shows
// (core/tuner/store/run_metrics.h), written as JSON when the run ends and cleared
// when it starts again, so that reading a sweep does not read every step.
// Runs that ended before have none: their figures come from their steps.
constexpr const char* kVersion4 = R"sql(
ALTER TABLE runs ADD COLUMN digest TEXT;
)sql";

// Version 5: the stamp of the check a run's configuration passed unchanged
// as it was written (db/store.h): read again under the same check, it is
// not checked again. Rows written before have none and are checked.
constexpr const char* kVersion5 = R"sql(
ALTER TABLE runs ADD COLUMN config_stamp TEXT;
)sql";

// Version 6: a run's step profile (RunEnd::samples), written when it ends
// and cleared when it starts again, so that predicting from 10^5 runs does
// not read their 25 million step rows. Runs that ended before have none:
// their profiles come from their steps.
constexpr const char* kVersion6 = R"sql(
ALTER TABLE runs ADD COLUMN samples BLOB;
)sql";

std::vector<std::string> migrations() { return {kVersion1, version2(), kVersion3, kVersion4, kVersion5, kVersion6}; }

struct FileState {
  std::int64_t application_id;
  std::int64_t version;
  std::int64_t objects;
};

FileState read_state(const Connection& c) {
  return {c.query_integer("PRAGMA application_id"), c.query_integer("PRAGMA user_version"),
          c.query_integer("SELECT count(*) FROM sqlite_master")};
}

// Refuses files that are not ours or are newer than this build.
void check_ownership(const Connection& c, const FileState& s) {
  const bool fresh = s.application_id == 0 && s.version == 0 && s.objects == 0;
  if (fresh) return;
  if (s.application_id != kApplicationId)
    throw Error(c.path() + " is an SQLite database of another application (application_id " +
                std::to_string(s.application_id) + "), not a commtune store; commtune leaves it untouched");
  if (s.version > kSchemaVersion)
    throw Error(c.path() + " was written by a newer commtune (store schema version " + std::to_string(s.version) +
                "; this build reads up to version " + std::to_string(kSchemaVersion) + "): upgrade commtune");
}

}  // namespace

std::string fill_run_params_sql(const std::string& source) {
  // Leaves of the JSON tree, outside arrays (an array is stored whole, as
  // JSON text); booleans become 0/1. json_tree quotes keys with an
  // underscore ($."world_size"); names drop the quotes.
  return "INSERT OR REPLACE INTO run_params (run_id, name, value) "
         "SELECT r.id, replace(substr(t.fullkey, 3), '\"', ''), "
         "CASE t.type WHEN 'true' THEN 1 WHEN 'false' THEN 0 WHEN 'array' THEN t.value ELSE t.atom END "
         "FROM (" +
         source +
         ") AS r, json_tree(r.config) AS t "
         "WHERE t.type != 'object' AND instr(t.fullkey, '[') = 0";
}

void migrate(Connection& c, int target_version) {
  if (target_version < 1 || target_version > kSchemaVersion)
    throw Error("no store schema version " + std::to_string(target_version));
  check_ownership(c, read_state(c));
  c.exec("PRAGMA journal_mode = WAL");
  const auto steps = migrations();
  while (true) {
    Transaction transaction(c);  // re-read under the write lock: another process may have migrated meanwhile
    const auto state = read_state(c);
    check_ownership(c, state);
    if (state.version >= target_version) return;
    if (state.version == 0) c.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
    c.exec(steps[state.version]);
    c.exec("PRAGMA user_version = " + std::to_string(state.version + 1));
    transaction.commit();
  }
}

int check_readable(const Connection& c) {
  const auto state = read_state(c);
  check_ownership(c, state);
  if (state.version == 0) throw Error(c.path() + " holds no commtune store yet (it is empty): run something first");
  if (state.version < kOldestReadableVersion)
    throw Error(c.path() + " has store schema version " + std::to_string(state.version) +
                "; open it once with write access (any commtune-cli command) to migrate it to version " +
                std::to_string(kSchemaVersion));
  return static_cast<int>(state.version);
}

}  // namespace commtune::db

#include "db/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "db/json_text.h"
#include "db/parallel.h"
#include "db/schema.h"

namespace commtune::db {

namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// The kernel's start time of a process (clock ticks since boot): with the pid
// it names a process uniquely, even after the pid is reused.
std::string process_start_time(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)  // field 22: starttime
    if (i == 22) return field;
  return "";
}

std::optional<std::string> optional_dump(const nlohmann::json& json) {
  return json.is_null() ? std::nullopt : std::optional<std::string>(json.dump());
}

nlohmann::json parse_json(const std::string& text) {
  if (text.empty()) return nullptr;
  return parse_bounded_json(text);
}

// A run's row by id; a version 4 store (read-only: it is not migrated) has no stamps.
std::string run_by_id(int version) {
  return std::string(
             "SELECT id, sweep_id, trial, name, config, status, host, owner, world_size, steps_requested, "
             "steps_completed, fingerprint, created_at, started_at, finished_at, wall_s, final_loss, reason, summary, "
             "tags, notes, digest, ") +
         (version >= 5 ? "config_stamp" : "NULL") + " FROM runs WHERE id = ?";
}

// A run's JSON columns as stored: read with the row, parsed apart from it
// (runs read together are parsed on every core).
struct RunTexts {
  std::string config, config_stamp, summary, digest;
};

// A run's row but its JSON columns, whose texts go to `texts`.
void read_row(const Statement& s, bool with_summary, bool with_digest, RunRecord& r, RunTexts& texts) {
  r.id = s.integer(0);
  r.sweep_id = s.optional_integer(1);
  r.trial = s.optional_integer(2);
  r.name = s.text(3);
  texts.config = s.text(4);
  r.status = s.text(5);
  r.host = s.text(6);
  r.owner = s.text(7);
  r.world_size = s.integer(8);
  r.steps_requested = s.integer(9);
  r.steps_completed = s.integer(10);
  r.fingerprint = s.text(11);
  r.created_at = s.real(12);
  r.started_at = s.optional_real(13);
  r.finished_at = s.optional_real(14);
  r.wall_s = s.real(15);
  r.final_loss = s.optional_real(16);
  r.reason = s.text(17);
  if (with_summary) texts.summary = s.text(18);
  r.tags = s.text(19);
  r.notes = s.text(20);
  if (with_digest) texts.digest = s.text(21);
  texts.config_stamp = s.text(22);
}

// The JSON columns parsed, the configuration checked (`identity`: installed_check_identity()).
void parse_texts(const RunTexts& texts, const std::string& identity, RunRecord& r) {
  auto config = read_stored_config(texts.config, texts.config_stamp, identity);
  r.config = std::move(config.config);
  r.config_problem = std::move(config.problem);
  r.summary = parse_json(texts.summary);
  r.digest = parse_json(texts.digest);
  if (r.digest.is_discarded()) r.digest = nullptr;  // a damaged digest is none: the figures come from the steps
}

SweepRecord read_sweep(const Statement& s) {
  return {s.integer(0), s.text(1), parse_json(s.text(2)), s.text(3), s.text(4), s.real(5), s.optional_real(6)};
}

std::string order_column(const std::string& key) {
  static const std::pair<const char*, const char*> columns[] = {
      {"id", "id"},         {"created", "created_at"},    {"name", "name"},
      {"status", "status"}, {"steps", "steps_completed"}, {"final_loss", "final_loss"},
      {"wall", "wall_s"}};
  for (const auto& [k, column] : columns)
    if (key == k) return column;
  std::string allowed;
  for (const auto& [k, column] : columns) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
  throw Error("cannot order runs by '" + key + "': choose one of " + allowed);
}

}  // namespace

namespace {

// A run or sweep that is missing, or that a live process is running, is not deleted.
void refuse_unless_deletable(const char* what, std::int64_t id, const std::string* state, const std::string* owner) {
  const auto name = std::string(what) + " " + std::to_string(id);
  if (!state) throw Error("there is no " + name);
  if (*state == status::kRunning && owner_alive(*owner)) throw Error(name + " is running: stop it before deleting it");
}

}  // namespace

bool status::is_end(const std::string& s) {
  return s == kSucceeded || s == kFailed || s == kDiverged || s == kCancelled || s == kInterrupted || s == kStopped;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string this_process_owner() {
  const long pid = static_cast<long>(::getpid());
  return host_name() + ":" + std::to_string(pid) + ":" + process_start_time(pid);
}

bool owner_alive(const std::string& owner) {
  const auto first = owner.find(':'), second = owner.rfind(':');
  if (first == std::string::npos || second == first) return false;
  if (owner.substr(0, first) != host_name()) return true;
  const long pid = std::strtol(owner.c_str() + first + 1, nullptr, 10);
  if (pid <= 0) return false;
  return process_start_time(pid) == owner.substr(second + 1);
}

std::filesystem::path user_data_folder() {
  namespace fs = std::filesystem;
  fs::path base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg && fs::path(xdg).is_absolute())
    base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    base = fs::path(home) / ".local" / "share";
  else
    base = fs::current_path();
  const auto folder = base / "commtune";
  std::error_code ignored;
  fs::create_directories(folder, ignored);
  return folder;
}

std::string default_store_path() {
  if (const char* env = std::getenv("COMMTUNE_DB"); env && *env) return env;
  return (user_data_folder() / "runs.db").string();
}

Store::Store(const std::string& path, Access access, Check check) : connection_(path, access) {
  connection_.exec("PRAGMA foreign_keys = ON");
  if (access == Access::ReadOnly) {
    version_ = check_readable(connection_);
    run_by_id_ = run_by_id(version_);
    return;
  }
  if (check == Check::Pages) {
    // A damaged page is found by the first write that reaches it, after the
    // run's row is in: look at every page first (a damaged one may also fail the check itself).
    auto verdict = connection_.prepare("PRAGMA quick_check(1)");
    if (verdict.next() && verdict.text(0) != "ok") throw_error(nullptr, SQLITE_CORRUPT, path, "checking");
  }
  migrate(connection_);
  version_ = kSchemaVersion;
  run_by_id_ = run_by_id(version_);
  // WAL keeps every committed transaction through a crash of this process;
  // NORMAL skips only the fsync that protects against power loss.
  connection_.exec("PRAGMA synchronous = NORMAL");
  mark_orphans_interrupted();
}

std::int64_t Store::create_sweep(const std::string& name, const nlohmann::json& spec) {
  connection_.prepare("INSERT INTO sweeps (name, spec, status, owner, created_at) VALUES (?, ?, ?, ?, ?)")
      .run(name, spec.dump(), status::kRunning, this_process_owner(), unix_now());
  return connection_.last_insert_id();
}

void Store::set_sweep_status(std::int64_t sweep_id, const std::string& s) {
  connection_.prepare("UPDATE sweeps SET status = ?, finished_at = CASE WHEN ? THEN ? ELSE NULL END WHERE id = ?")
      .run(s, static_cast<std::int64_t>(status::is_end(s)), unix_now(), sweep_id);
}

void Store::claim_sweep(std::int64_t sweep_id) {
  // The look and the claim under one write lock: two processes resuming the
  // same sweep at the same instant must not both see it free.
  Transaction transaction(connection_);
  const auto found = sweep(sweep_id);
  if (!found) throw Error("there is no sweep " + std::to_string(sweep_id) + " in " + connection_.path());
  const auto me = this_process_owner();
  if (found->status == status::kRunning && found->owner != me && owner_alive(found->owner))
    throw Error("sweep " + std::to_string(sweep_id) + " is running in another process (" + found->owner + ")");
  connection_.prepare("UPDATE sweeps SET status = ?, owner = ?, finished_at = NULL WHERE id = ?")
      .run(status::kRunning, me, sweep_id);
  transaction.commit();
}

std::optional<SweepRecord> Store::sweep(std::int64_t sweep_id) const {
  auto s =
      connection_.prepare("SELECT id, name, spec, status, owner, created_at, finished_at FROM sweeps WHERE id = ?");
  s.bind_all(sweep_id);
  if (!s.next()) return std::nullopt;
  return read_sweep(s);
}

std::vector<SweepRecord> Store::sweeps() const {
  auto s = connection_.prepare("SELECT id, name, spec, status, owner, created_at, finished_at FROM sweeps ORDER BY id");
  std::vector<SweepRecord> out;
  while (s.next()) out.push_back(read_sweep(s));
  return out;
}

void Store::rename_sweep(std::int64_t sweep_id, const std::string& name) {
  connection_.prepare("UPDATE sweeps SET name = ? WHERE id = ?").run(name, sweep_id);
  if (connection_.changes() != 1) throw Error("there is no sweep " + std::to_string(sweep_id));
}

void Store::delete_sweep(std::int64_t sweep_id) {
  Transaction transaction(connection_);
  const auto found = sweep(sweep_id);
  refuse_unless_deletable("sweep", sweep_id, found ? &found->status : nullptr, found ? &found->owner : nullptr);
  auto running = connection_.prepare("SELECT count(*) FROM runs WHERE sweep_id = ? AND status = ?");
  running.bind_all(sweep_id, status::kRunning);
  if (running.next() && running.integer(0) > 0)
    throw Error("sweep " + std::to_string(sweep_id) + " has a running trial: stop it before deleting the sweep");
  connection_.prepare("DELETE FROM sweeps WHERE id = ?").run(sweep_id);  // its runs and their rows cascade
  transaction.commit();
}

std::int64_t Store::create_run(const NewRun& run, const std::string& s) {
  const auto text = run.config.dump();
  Transaction transaction(connection_);
  const bool started = s == status::kRunning;
  connection_
      .prepare(
          "INSERT INTO runs (sweep_id, trial, name, config, config_stamp, status, host, owner, world_size, "
          "steps_requested, fingerprint, created_at, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
      .run(run.sweep_id, run.trial, run.name, text, stamp_for(run.config, text), s, host_name(),
           started ? this_process_owner() : std::string(), run.world_size, run.steps_requested, run.fingerprint,
           unix_now(), started ? std::optional<double>(unix_now()) : std::nullopt);
  const auto id = connection_.last_insert_id();
  connection_.prepare(fill_run_params_sql("SELECT id, config FROM runs WHERE id = ?1")).run(id);
  transaction.commit();
  return id;
}

void Store::plan_pending_run(std::int64_t run_id, const NewRun& run) {
  const auto text = run.config.dump();
  Transaction transaction(connection_);
  connection_
      .prepare(
          "UPDATE runs SET name = ?, config = ?, config_stamp = ?, world_size = ?, steps_requested = ?, "
          "fingerprint = ? WHERE id = ? AND status = ?")
      .run(run.name, text, stamp_for(run.config, text), run.world_size, run.steps_requested, run.fingerprint,
           run_id, status::kPending);
  if (connection_.changes() != 1) throw Error("run " + std::to_string(run_id) + " is not a pending run");
  connection_.prepare("DELETE FROM run_params WHERE run_id = ?").run(run_id);
  connection_.prepare(fill_run_params_sql("SELECT id, config FROM runs WHERE id = ?1")).run(run_id);
  transaction.commit();
}

std::string Store::runs_signature() const {
  auto s = connection_.prepare(
      "SELECT coalesce(group_concat(id || ':' || status || ':' || steps_completed || ':' || name || ':' || tags || ':' "
      "|| length(notes), char(10)), '') || (SELECT coalesce(group_concat(id || ':' || name || ':' || status), '') FROM "
      "sweeps) FROM (SELECT id, status, steps_completed, name, tags, notes FROM runs ORDER BY id)");
  return s.next() ? s.text(0) : std::string();
}

void Store::start_run(std::int64_t run_id) {
  connection_
      .prepare(
          "UPDATE runs SET status = ?, owner = ?, host = ?, started_at = coalesce(started_at, ?), finished_at = NULL, "
          "reason = '', digest = NULL, samples = NULL WHERE id = ?")
      .run(status::kRunning, this_process_owner(), host_name(), unix_now(), run_id);
}

void Store::finish_run(std::int64_t run_id, const RunEnd& end) {
  connection_
      .prepare(
          "UPDATE runs SET status = ?, reason = ?, steps_completed = ?, final_loss = ?, wall_s = ?, summary = ?, "
          "digest = ?, samples = ?, finished_at = CASE WHEN ? THEN ? ELSE NULL END WHERE id = ?")
      .run(end.status, end.reason, end.steps_completed, end.final_loss, end.wall_s, optional_dump(end.summary),
           optional_dump(end.digest),
           end.samples.empty() ? std::optional<Blob>() : std::optional<Blob>(Blob{end.samples}),
           static_cast<std::int64_t>(status::is_end(end.status)), unix_now(), run_id);
}

void Store::set_run_status(std::int64_t run_id, const std::string& s, const std::string& reason) {
  connection_
      .prepare(
          "UPDATE runs SET status = ?, reason = ?, finished_at = CASE WHEN ? THEN ? ELSE finished_at END WHERE id = ?")
      .run(s, reason, static_cast<std::int64_t>(status::is_end(s)), unix_now(), run_id);
}

std::optional<RunRecord> Store::run(std::int64_t run_id, bool with_summary) const {
  auto s = connection_.prepare(run_by_id_);
  s.bind_all(run_id);
  if (!s.next()) return std::nullopt;
  RunRecord r;
  RunTexts texts;
  read_row(s, with_summary, /*with_digest=*/true, r, texts);
  parse_texts(texts, installed_check_identity(), r);
  return r;
}

std::vector<RunRecord> Store::runs(const RunFilter& filter) const {
  // The ids in the filter's order first, then each row by its id: sorting
  // whole rows (configurations, summaries) spilled 10^5 of them to SQLite's
  // temporary files, where sorting their ids alone stays small.
  return read_runs(run_ids(filter), filter.with_summary, filter.with_digest);
}

std::vector<RunRecord> Store::runs(const std::vector<std::int64_t>& ids) const { return read_runs(ids, false, true); }

std::vector<std::string> Store::stored_samples(const std::vector<std::int64_t>& ids) const {
  std::vector<std::string> out(ids.size());
  if (version_ < 6 || ids.empty()) return out;
  const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
  if (*lo > 0 && static_cast<std::uint64_t>(*hi - *lo) < 2 * ids.size()) {
    // A sweep's runs lie together: one scan of their ids' range reads them
    // all, where a search per id cost a third of a second at 10^5.
    constexpr auto kNone = std::numeric_limits<std::size_t>::max();
    std::vector<std::size_t> first(static_cast<std::size_t>(*hi - *lo) + 1, kNone);  // id - lo: its first place
    for (std::size_t i = ids.size(); i-- > 0;) first[static_cast<std::size_t>(ids[i] - *lo)] = i;
    auto s = connection_.prepare("SELECT id, samples FROM runs WHERE id BETWEEN ? AND ? AND samples IS NOT NULL");
    s.bind_all(*lo, *hi);
    while (s.next())
      if (const auto at = first[static_cast<std::size_t>(s.integer(0) - *lo)]; at != kNone) out[at] = s.blob(1);
    for (std::size_t i = 0; i < ids.size(); ++i)  // an id named twice
      if (const auto at = first[static_cast<std::size_t>(ids[i] - *lo)]; at != i) out[i] = out[at];
    return out;
  }
  auto s = connection_.prepare("SELECT samples FROM runs WHERE id = ?");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    s.bind_all(ids[i]);
    if (s.next()) out[i] = s.blob(0);
  }
  return out;
}

std::vector<RunRecord> Store::read_runs(const std::vector<std::int64_t>& ids, bool with_summary,
                                        bool with_digest) const {
  auto s = connection_.prepare(run_by_id_);
  std::vector<RunRecord> out(ids.size());
  std::vector<RunTexts> texts(ids.size());
  std::vector<char> stored(ids.size(), 0);  // a run deleted since its id was read is left out
  const auto identity = installed_check_identity();
  // Parsing and checking a configuration costs more than reading its row:
  // the rows read so far are parsed on every core while reading goes on.
  produce_and_process(
      ids.size(),
      [&](std::size_t i) {
        s.bind_all(ids[i]);
        if ((stored[i] = s.next())) read_row(s, with_summary, with_digest, out[i], texts[i]);
      },
      [&](std::size_t i) {
        if (stored[i]) parse_texts(texts[i], identity, out[i]);
        texts[i] = {};
      });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (stored[i] && kept++ != i) out[kept - 1] = std::move(out[i]);
  out.resize(kept);
  return out;
}

std::vector<std::int64_t> Store::run_ids(const RunFilter& filter) const {
  auto s = select_runs("id", filter);
  std::vector<std::int64_t> out;
  while (s.next()) out.push_back(s.integer(0));
  return out;
}

Statement Store::select_runs(const char* columns, const RunFilter& filter) const {
  std::string sql = std::string("SELECT ") + columns + " FROM runs WHERE 1";
  if (filter.sweep_id) sql += " AND sweep_id = ?";
  if (!filter.statuses.empty()) {
    sql += " AND status IN (";
    for (std::size_t i = 0; i < filter.statuses.size(); ++i) sql += i ? ", ?" : "?";
    sql += ")";
  }
  // A condition matches the parameter's value as stored (1 for true) or as text.
  for (std::size_t i = 0; i < filter.params.size(); ++i)
    sql +=
        " AND EXISTS (SELECT 1 FROM run_params p WHERE p.run_id = runs.id AND p.name = ? AND (p.value = ? OR "
        "CAST(p.value AS TEXT) = ? OR (p.value = 1 AND ? = 'true') OR (p.value = 0 AND ? = 'false')))";
  sql += " ORDER BY " + order_column(filter.order_by) + (filter.descending ? " DESC" : " ASC") + ", id";
  if (filter.limit > 0) sql += " LIMIT " + std::to_string(filter.limit);

  auto s = connection_.prepare(sql);
  int index = 1;
  if (filter.sweep_id) s.bind(index++, *filter.sweep_id);
  for (const auto& st : filter.statuses) s.bind(index++, st);
  for (const auto& [name, value] : filter.params) {
    s.bind(index++, name);
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end);
    if (!value.empty() && end && *end == '\0')
      s.bind(index++, number);
    else
      s.bind(index++, value);
    for (int k = 0; k < 3; ++k) s.bind(index++, value);
  }
  return s;
}

std::map<std::string, std::int64_t> Store::trial_statuses(std::int64_t sweep_id) const {
  auto s = connection_.prepare("SELECT status, count(*) FROM runs WHERE sweep_id = ? GROUP BY status");
  s.bind_all(sweep_id);
  std::map<std::string, std::int64_t> out;
  while (s.next()) out[s.text(0)] = s.integer(1);
  return out;
}

void Store::rename_run(std::int64_t run_id, const std::string& name) {
  connection_.prepare("UPDATE runs SET name = ? WHERE id = ?").run(name, run_id);
  if (connection_.changes() != 1) throw Error("there is no run " + std::to_string(run_id));
}

void Store::annotate_run(std::int64_t run_id, const std::string& tags, const std::string& notes) {
  std::string joined;
  std::size_t start = 0;
  while (start <= tags.size()) {
    const auto comma = std::min(tags.find(',', start), tags.size());
    auto tag = tags.substr(start, comma - start);
    tag.erase(0, tag.find_first_not_of(" \t\n"));
    tag.erase(tag.find_last_not_of(" \t\n") + 1);
    if (!tag.empty()) joined += (joined.empty() ? "" : ", ") + tag;
    start = comma + 1;
  }
  connection_.prepare("UPDATE runs SET tags = ?, notes = ? WHERE id = ?").run(joined, notes, run_id);
  if (connection_.changes() != 1) throw Error("there is no run " + std::to_string(run_id));
}

void Store::delete_run(std::int64_t run_id) {
  Transaction transaction(connection_);
  const auto found = run(run_id);
  refuse_unless_deletable("run", run_id, found ? &found->status : nullptr, found ? &found->owner : nullptr);
  connection_.prepare("DELETE FROM runs WHERE id = ?").run(run_id);  // metrics, stats, events, params cascade
  transaction.commit();
}

std::int64_t Store::stat_id(const std::string& name) {
  if (!find_stat_) {
    find_stat_.emplace(connection_.prepare("SELECT id FROM stat_names WHERE name = ?"));
    add_stat_.emplace(connection_.prepare("INSERT INTO stat_names (name) VALUES (?)"));
  }
  find_stat_->bind_all(name);
  if (find_stat_->next()) {
    const auto id = find_stat_->integer(0);
    find_stat_->reset();
    return id;
  }
  find_stat_->reset();
  add_stat_->run(name);
  return connection_.last_insert_id();
}

void Store::insert(const StepRow& r) {
  if (!insert_step_)
    insert_step_.emplace(connection_.prepare(
        "INSERT OR REPLACE INTO step_metrics (run_id, rank, step, wall_s, loss, lr, t_data, t_forward, t_backward, "
        "t_comm_wait, t_hook, t_optimizer, t_step, wire_bytes, uncompressed_bytes) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  insert_step_->run(r.run_id, r.rank, r.step, r.wall_s, r.loss, r.lr, r.t_data, r.t_forward, r.t_backward,
                    r.t_comm_wait, r.t_hook, r.t_optimizer, r.t_step, r.wire_bytes, r.uncompressed_bytes);
}

void Store::insert(const StatRow& r) {
  if (!insert_stat_)
    insert_stat_.emplace(connection_.prepare(
        "INSERT OR REPLACE INTO step_stats (run_id, stat_id, bucket, rank, step, value) VALUES (?, ?, ?, ?, ?, ?)"));
  insert_stat_->run(r.run_id, r.stat_id, r.bucket, r.rank, r.step, r.value);
}

void Store::insert(const EventRow& r) {
  if (!insert_event_)
    insert_event_.emplace(
        connection_.prepare("INSERT INTO run_events (run_id, rank, time, kind, body) VALUES (?, ?, ?, ?, ?)"));
  insert_event_->run(r.run_id, r.rank, r.time, r.kind, r.body.dump());
}

void Store::add_artifact(std::int64_t run_id, const std::string& kind, const std::string& path) {
  connection_.prepare("INSERT OR REPLACE INTO artifacts (run_id, kind, path, created_at) VALUES (?, ?, ?, ?)")
      .run(run_id, kind, path, unix_now());
}

std::vector<StepRow> Store::steps(std::int64_t run_id, std::optional<std::int32_t> rank, std::int64_t from_step) const {
  auto s = connection_.prepare(
      "SELECT run_id, rank, step, wall_s, loss, lr, t_data, t_forward, t_backward, t_comm_wait, t_hook, t_optimizer, "
      "t_step, wire_bytes, uncompressed_bytes FROM step_metrics WHERE run_id = ?1 AND (?2 IS NULL OR rank = ?2) "
      "AND step >= ?3 ORDER BY rank, step");
  s.bind_all(run_id, rank, from_step);
  std::vector<StepRow> out;
  while (s.next()) {
    StepRow r;
    r.run_id = s.integer(0);
    r.rank = static_cast<std::int32_t>(s.integer(1));
    r.step = s.integer(2);
    r.wall_s = s.real(3);
    r.loss = s.real(4);
    r.lr = s.real(5);
    r.t_data = s.real(6);
    r.t_forward = s.real(7);
    r.t_backward = s.real(8);
    r.t_comm_wait = s.real(9);
    r.t_hook = s.real(10);
    r.t_optimizer = s.real(11);
    r.t_step = s.real(12);
    r.wire_bytes = static_cast<std::uint64_t>(s.integer(13));
    r.uncompressed_bytes = static_cast<std::uint64_t>(s.integer(14));
    out.push_back(r);
  }
  return out;
}

std::vector<CurvePoint> Store::curve(std::int64_t run_id) const {
  static const auto sql = "SELECT step, max(wall_s), " + sql_mean_of_reals("loss") + ", " +
                          sql_mean_of_measures("t_step") + ", " + sql_mean_of_measures("wire_bytes") + ", " +
                          sql_mean_of_measures("uncompressed_bytes") +
                          ", count(*) FROM step_metrics WHERE run_id = ? GROUP BY step ORDER BY step";
  auto s = connection_.prepare(sql);
  s.bind_all(run_id);
  std::vector<CurvePoint> out;
  while (s.next())
    out.push_back({s.integer(0), s.real(1), s.optional_real(2), s.optional_real(3), s.optional_real(4),
                   s.optional_real(5), static_cast<int>(s.integer(6))});
  return out;
}

std::vector<StatPoint> Store::stat(std::int64_t run_id, const std::string& name) const {
  auto s = connection_.prepare(
      "SELECT rank, step, bucket, value FROM step_stats WHERE run_id = ? AND stat_id = (SELECT id FROM stat_names "
      "WHERE name = ?) ORDER BY bucket, rank, step");
  s.bind_all(run_id, name);
  std::vector<StatPoint> out;
  while (s.next())
    out.push_back(
        {static_cast<std::int32_t>(s.integer(0)), s.integer(1), static_cast<std::int32_t>(s.integer(2)), s.real(3)});
  return out;
}

std::vector<std::string> Store::stat_names(std::int64_t run_id) const {
  auto s = connection_.prepare(
      "SELECT name FROM stat_names WHERE id IN (SELECT DISTINCT stat_id FROM step_stats WHERE run_id = ?) ORDER BY "
      "name");
  s.bind_all(run_id);
  std::vector<std::string> out;
  while (s.next()) out.push_back(s.text(0));
  return out;
}

std::vector<std::pair<std::string, StatPoint>> Store::latest_bucket_stats(std::int64_t run_id,
                                                                          std::int32_t rank) const {
  // SQLite takes the bare columns (value) from the row where max(step) is.
  auto s = connection_.prepare(
      "SELECT n.name, t.bucket, max(t.step), t.value FROM step_stats t JOIN stat_names n ON n.id = t.stat_id "
      "WHERE t.run_id = ? AND t.rank = ? AND t.bucket >= 0 GROUP BY t.stat_id, t.bucket ORDER BY t.bucket, n.name");
  s.bind_all(run_id, rank);
  std::vector<std::pair<std::string, StatPoint>> out;
  while (s.next()) out.push_back({s.text(0), {rank, s.integer(2), static_cast<std::int32_t>(s.integer(1)), s.real(3)}});
  return out;
}

std::vector<EventRow> Store::events(std::int64_t run_id, const std::string& kind) const {
  auto s = connection_.prepare(
      "SELECT run_id, rank, time, kind, body FROM run_events WHERE run_id = ?1 AND (?2 = '' OR kind = ?2) ORDER BY id");
  s.bind_all(run_id, kind);
  std::vector<EventRow> out;
  while (s.next())
    out.push_back({s.integer(0), static_cast<std::int32_t>(s.integer(1)), s.real(2), s.text(3), parse_json(s.text(4))});
  return out;
}

nlohmann::json Store::last_event_member(std::int64_t run_id, const std::string& kind, const std::string& member) const {
  // The member as JSON text ('null' when absent; json_quote keeps an object
  // or array as it is); a body that is no JSON has no members.
  auto s = connection_.prepare(
      "SELECT CASE WHEN json_valid(body) THEN json_quote(json_extract(body, '$.\"' || ?3 || '\"')) END "
      "FROM run_events WHERE run_id = ?1 AND kind = ?2 ORDER BY id DESC LIMIT 1");
  s.bind_all(run_id, kind, member);
  if (!s.next() || s.is_null(0)) return nullptr;
  return parse_json(s.text(0));
}

std::vector<Artifact> Store::artifacts(std::int64_t run_id) const {
  auto s = connection_.prepare("SELECT run_id, kind, path, created_at FROM artifacts WHERE run_id = ? ORDER BY id");
  s.bind_all(run_id);
  std::vector<Artifact> out;
  while (s.next()) out.push_back({s.integer(0), s.text(1), s.text(2), s.real(3)});
  return out;
}

std::int64_t Store::steps_of_every_rank(std::int64_t run_id) const {
  auto s = connection_.prepare(
      "SELECT CASE WHEN count(*) = (SELECT world_size FROM runs WHERE id = ?1) THEN min(n) ELSE 0 END "
      "FROM (SELECT max(step) + 1 AS n FROM step_metrics WHERE run_id = ?1 GROUP BY rank)");
  s.bind_all(run_id);
  return s.next() && !s.is_null(0) ? s.integer(0) : 0;
}

std::optional<double> Store::loss_at_step(std::int64_t run_id, std::int64_t step) const {
  static const auto sql = "SELECT " + sql_mean_of_reals("loss") + " FROM step_metrics WHERE run_id = ? AND step = ?";
  auto s = connection_.prepare(sql);
  s.bind_all(run_id, step);
  return s.next() ? s.optional_real(0) : std::nullopt;
}

std::int64_t Store::count_steps(std::int64_t run_id) const {
  auto s = connection_.prepare("SELECT count(*) FROM step_metrics WHERE run_id = ?");
  s.bind_all(run_id);
  return s.next() ? s.integer(0) : 0;
}

int Store::mark_orphans_interrupted() {
  Transaction transaction(connection_);
  std::set<std::string> dead;
  auto owners = connection_.prepare(
      "SELECT DISTINCT owner FROM runs WHERE status = 'running' UNION SELECT DISTINCT owner FROM sweeps WHERE status = "
      "'running'");
  while (owners.next()) {
    const auto owner = owners.text(0);
    if (!owner_alive(owner)) dead.insert(owner);
  }
  int changed = 0;
  auto orphans = connection_.prepare("SELECT id FROM runs WHERE status = 'running' AND owner = ?");
  // What was committed counts: the steps every rank stored, the time up to
  // the last of them, the loss there.
  auto interrupt = connection_.prepare(
      "UPDATE runs SET status = 'interrupted', reason = 'the process running it (' || owner || ') ended without "
      "finishing it', finished_at = ?, steps_completed = max(steps_completed, ?), wall_s = max(wall_s, "
      "coalesce((SELECT max(wall_s) FROM step_metrics WHERE run_id = ?3), 0)), final_loss = coalesce(?, final_loss) "
      "WHERE id = ?3");
  auto sweeps = connection_.prepare(
      "UPDATE sweeps SET status = 'interrupted', finished_at = ? WHERE status = 'running' AND owner = ?");
  for (const auto& owner : dead) {
    std::vector<std::int64_t> ids;
    orphans.bind_all(owner);
    while (orphans.next()) ids.push_back(orphans.integer(0));
    for (const auto id : ids) {
      const auto steps = steps_of_every_rank(id);
      std::optional<double> last_loss;
      if (steps > 0) last_loss = loss_at_step(id, steps - 1);
      interrupt.run(unix_now(), steps, id, last_loss);
      ++changed;
    }
    sweeps.run(unix_now(), owner);
  }
  transaction.commit();
  return changed;
}

}  // namespace commtune::db

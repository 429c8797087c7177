#include "db/sqlite.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <unordered_map>

#include <sqlite3.h>

#include <utility>

namespace commtune::db {

namespace {

std::string database_path(sqlite3* db) {
  const char* name = db ? sqlite3_db_filename(db, "main") : nullptr;
  return name && *name ? name : "(database)";
}

// The path made absolute, from the working folder (POSIX calls only: a
// std::filesystem call here made every process that opened a store abort at
// exit, in libtorch's static destructors, with the PyPI libtorch).
std::string absolute_path(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[4096];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + path : path;
}

std::string folder_of(const std::string& path) {
  const auto absolute = absolute_path(path);
  const auto slash = absolute.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : absolute.substr(0, slash);
}

bool folder_is_writable(const std::string& path) { return ::access(folder_of(path).c_str(), W_OK) == 0; }

// A path as a file: URI's path (RFC 3986: what is not unreserved or a slash, escaped).
std::string uri_path(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : absolute_path(path)) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// What a write that failed for want of a writable folder should say.
std::string read_only_folder_note(const std::string& path) {
  if (folder_is_writable(path)) return "";
  return "; its folder " + folder_of(path) +
         " is not writable here (SQLite writes its journal beside the file): commands that only read the store "
         "work, a run or a sweep needs another --db";
}

}  // namespace

void throw_error(sqlite3* db, int code, const std::string& path, std::string_view context) {
  const int primary = code & 0xff;
  const std::string detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  switch (primary) {
    case SQLITE_NOTADB:
      throw Error(path + " is not a commtune database (not an SQLite file); commtune leaves it untouched", primary);
    case SQLITE_CORRUPT:
      throw Error("the database " + path + " is damaged (" + detail + "); commtune will not write to it. `sqlite3 " +
                      path + " .recover` can rescue what is left, or choose another file with --db",
                  primary);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw Error("the database " + path + " stayed locked by another process (" + detail + ")", primary);
    case SQLITE_FULL:
      throw Error("the disk holding " + path + " is full", primary);
    case SQLITE_READONLY:
      throw Error("the database " + path + " is read-only here (" + detail + ")" + read_only_folder_note(path),
                  primary);
    case SQLITE_CANTOPEN:
      throw Error("cannot open the database " + path + " (" + detail + ")" + read_only_folder_note(path), primary);
    default:
      throw Error(std::string(context) + " on " + path + ": " + detail, primary);
  }
}

namespace detail {
// One idle statement per SQL text. A connection is used by one thread at a
// time (SQLITE_OPEN_NOMUTEX), and so is its pool.
struct StatementPool {
  static constexpr std::size_t kMostIdle = 128;
  bool open = true;
  std::unordered_map<std::string, sqlite3_stmt*> idle;

  void close() noexcept {
    open = false;
    for (auto& [sql, stmt] : idle) sqlite3_finalize(stmt);
    idle.clear();
  }
};
}  // namespace detail

Statement::Statement(sqlite3* db, sqlite3_stmt* stmt, std::shared_ptr<detail::StatementPool> pool)
    : db_(db), stmt_(stmt), pool_(std::move(pool)) {}

Statement::~Statement() { release(); }

void Statement::release() noexcept {
  if (!stmt_) return;
  const auto stmt = std::exchange(stmt_, nullptr);
  if (pool_ && pool_->open && pool_->idle.size() < detail::StatementPool::kMostIdle) {
    sqlite3_reset(stmt);  // ends its read, so it holds no snapshot while idle
    sqlite3_clear_bindings(stmt);
    if (pool_->idle.emplace(sqlite3_sql(stmt), stmt).second) return;
  }
  sqlite3_finalize(stmt);
}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      pool_(std::move(other.pool_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    release();
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    pool_ = std::move(other.pool_);
  }
  return *this;
}

void Statement::fail(int code) const {
  const char* sql = sqlite3_sql(stmt_);
  throw_error(db_, code, database_path(db_),
              std::string("running '") + std::string(sql ? sql : "").substr(0, 60) + "'");
}

std::string sql_mean_of_reals(std::string_view column) {
  const std::string c(column), nan = std::string("'") + kNaNText + "'";
  return "CASE WHEN max(typeof(" + c + ") NOT IN ('integer', 'real') AND " + c + " IS NOT " + nan +
         ") THEN NULL WHEN max(" + c + " IS " + nan + ") THEN " + nan + " ELSE avg(" + c + ") END";
}

std::string sql_mean_of_measures(std::string_view column) {
  const std::string c(column);
  return "CASE WHEN max(typeof(" + c + ") NOT IN ('integer', 'real') OR " + c + " < 0) THEN NULL ELSE avg(" + c +
         ") END";
}

void Statement::bind(int index, std::int64_t value) {
  if (const int rc = sqlite3_bind_int64(stmt_, index, value); rc != SQLITE_OK) fail(rc);
}

void Statement::bind(int index, double value) {
  // SQLite stores a NaN REAL as NULL, which would read as "no value".
  if (std::isnan(value)) return bind(index, std::string_view(kNaNText));
  if (const int rc = sqlite3_bind_double(stmt_, index, value); rc != SQLITE_OK) fail(rc);
}

void Statement::bind(int index, std::string_view value) {
  if (const int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
      rc != SQLITE_OK)
    fail(rc);
}

void Statement::bind(int index, Blob value) {
  if (const int rc = sqlite3_bind_blob64(stmt_, index, value.bytes.data(), value.bytes.size(), SQLITE_TRANSIENT);
      rc != SQLITE_OK)
    fail(rc);
}

void Statement::bind(int index, std::nullopt_t) {
  if (const int rc = sqlite3_bind_null(stmt_, index); rc != SQLITE_OK) fail(rc);
}

bool Statement::next() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);
  fail(rc);
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
std::int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return optional_real(column).value_or(NAN); }

std::string Statement::text(int column) const {
  const auto* data = sqlite3_column_text(stmt_, column);
  return data ? std::string(reinterpret_cast<const char*>(data), sqlite3_column_bytes(stmt_, column)) : std::string();
}

std::string Statement::blob(int column) const {
  const auto* data = sqlite3_column_blob(stmt_, column);
  return data ? std::string(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, column)) : std::string();
}

std::optional<std::int64_t> Statement::optional_integer(int column) const {
  if (is_null(column)) return std::nullopt;
  return integer(column);
}

std::optional<double> Statement::optional_real(int column) const {
  switch (sqlite3_column_type(stmt_, column)) {
    case SQLITE_INTEGER:
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt_, column);
    case SQLITE_TEXT:
      if (text(column) == kNaNText) return NAN;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Connection::Connection(const std::string& path, Access access, int busy_timeout_ms) : path_(path), access_(access) {
  if (access == Access::ReadWrite) {
    open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    // SQLite opens a file it may not write read-only without a word: say so now, not at the first write.
    if (sqlite3_db_readonly(db_, "main") == 1) {
      sqlite3_close_v2(db_);
      db_ = nullptr;
      throw_error(nullptr, SQLITE_READONLY, path, "opening");
    }
  } else {
    open(path, SQLITE_OPEN_READONLY);
    // The first read is where a WAL store in a folder we cannot write fails.
    // (SQLITE_CANTOPEN, or SQLITE_READONLY_CANTINIT where the shared-memory file is missing.)
    if (sqlite3_exec(db_, "PRAGMA schema_version", nullptr, nullptr, nullptr) != SQLITE_OK &&
        !folder_is_writable(path)) {
      sqlite3_close_v2(db_);
      db_ = nullptr;
      open("file:" + uri_path(path) + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    }
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

void Connection::open(const std::string& name, int flags) {
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw_error(nullptr, rc, path_, "opening");
  }
  sqlite3_extended_result_codes(db_, 1);
  pool_ = std::make_shared<detail::StatementPool>();
}

void Connection::close() noexcept {
  if (pool_) pool_->close();
  sqlite3_close_v2(db_);  // a statement still alive keeps the handle until it is finalized
}

Connection::~Connection() { close(); }

Connection::Connection(Connection&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      access_(other.access_),
      pool_(std::move(other.pool_)) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    access_ = other.access_;
    pool_ = std::move(other.pool_);
  }
  return *this;
}

void Connection::exec(std::string_view sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    sqlite3_free(message);
    throw_error(db_, rc, path_, "running '" + std::string(sql.substr(0, 60)) + "'");
  }
}

Statement Connection::prepare(std::string_view sql) const {
  if (pool_) {
    const auto idle = pool_->idle.find(std::string(sql));
    if (idle != pool_->idle.end()) {
      const auto stmt = idle->second;
      pool_->idle.erase(idle);
      return Statement(db_, stmt, pool_);
    }
  }
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) throw_error(db_, rc, database_path(db_), "preparing '" + std::string(sql.substr(0, 60)) + "'");
  return Statement(db_, stmt, pool_);
}

std::int64_t Connection::query_integer(std::string_view sql, std::int64_t fallback) const {
  auto statement = prepare(sql);
  return statement.next() && !statement.is_null(0) ? statement.integer(0) : fallback;
}

std::int64_t Connection::last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
int Connection::changes() const { return sqlite3_changes(db_); }

Transaction::Transaction(Connection& connection)
    : connection_(connection), nested_(sqlite3_get_autocommit(connection.handle()) == 0) {
  connection_.exec(nested_ ? "SAVEPOINT nested" : "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (done_) return;
  if (nested_)
    sqlite3_exec(connection_.handle(), "ROLLBACK TO nested; RELEASE nested", nullptr, nullptr, nullptr);
  else
    sqlite3_exec(connection_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  connection_.exec(nested_ ? "RELEASE nested" : "COMMIT");
  done_ = true;
}

}  // namespace commtune::db

// A thin RAII layer over the SQLite C API: a connection, prepared statements
// with typed binding, and transactions. Every failure becomes db::Error with
// the database's path and SQLite's own words.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

struct sqlite3;
struct sqlite3_stmt;

namespace commtune::db {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, int code = 0) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }  // SQLite's primary result code, 0 when not from SQLite

 private:
  int code_;
};

// How a NaN REAL is stored: as this TEXT (SQLite would store NULL, which
// reads as "no value"). real() reads it back as NaN.
inline constexpr const char* kNaNText = "NaN";
// SQL for avg(column) over a group: NaN (kNaNText) when any value is, and
// NULL (missing) when any value is no number at all (NULL, other text, a
// blob): a hand-edited or damaged row is missing, not 0 and not a divergence.
std::string sql_mean_of_reals(std::string_view column);
// SQL for avg(column) of a measure that cannot be negative (a time, a count
// of bytes): NULL when any value is not a number of at least 0.
std::string sql_mean_of_measures(std::string_view column);

namespace detail {
struct StatementPool;
}

// Bytes bound as a BLOB (a std::string_view binds as TEXT).
struct Blob {
  std::string_view bytes;
};

class Statement {
 public:
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds parameters from 1 upward; nullopt binds NULL, a NaN double kNaNText.
  template <class... Args>
  Statement& bind_all(const Args&... args) {
    reset();
    int index = 1;
    (bind(index++, args), ...);
    return *this;
  }
  void bind(int index, std::int64_t value);
  void bind(int index, int value) { bind(index, static_cast<std::int64_t>(value)); }
  void bind(int index, std::uint64_t value) { bind(index, static_cast<std::int64_t>(value)); }
  void bind(int index, double value);
  void bind(int index, std::string_view value);
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  void bind(int index, Blob value);
  void bind(int index, std::nullopt_t);
  template <class T>
  void bind(int index, const std::optional<T>& value) {
    if (value)
      bind(index, *value);
    else
      bind(index, std::nullopt);
  }

  // Advances to the next row: true while there is one.
  bool next();
  // Binds, runs to completion, and resets.
  template <class... Args>
  void run(const Args&... args) {
    bind_all(args...);
    while (next()) {
    }
    reset();
  }
  void reset();

  bool is_null(int column) const;
  std::int64_t integer(int column) const;
  // A number column: NaN where it holds no number (NULL, text other than
  // kNaNText, a blob), as a reader that keeps doubles marks a gap.
  double real(int column) const;
  std::string text(int column) const;
  std::string blob(int column) const;  // "" for NULL
  std::optional<std::int64_t> optional_integer(int column) const;
  // The number, NaN for kNaNText, and nullopt for anything that is no number
  // (NULL, other text such as 'abc' or 'Infinity', a blob): missing, never 0.
  std::optional<double> optional_real(int column) const;

 private:
  friend class Connection;
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::shared_ptr<detail::StatementPool> pool);
  // Hands the statement back to its connection's pool (reset, unbound), or
  // finalizes it when the pool has one for its SQL or is closed.
  void release() noexcept;
  [[noreturn]] void fail(int code) const;

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::shared_ptr<detail::StatementPool> pool_;
};

class Connection {
 public:
  enum class Access { ReadWrite, ReadOnly };
  // Opens (and for ReadWrite creates) the file. Waits up to `busy_timeout_ms`
  // when another connection holds the write lock. ReadOnly also reads a store
  // in a folder this process cannot write (a WAL database wants to create its
  // shared-memory file beside it): it then opens the file as immutable, which
  // is right because nobody who shares such a folder with us can be writing
  // through SQLite's locks we could see.
  Connection(const std::string& path, Access access, int busy_timeout_ms = 10000);
  ~Connection();
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void exec(std::string_view sql);
  Statement prepare(std::string_view sql) const;
  // The first column of the first row of a query (an integer), or `fallback` without rows.
  std::int64_t query_integer(std::string_view sql, std::int64_t fallback = 0) const;
  std::int64_t last_insert_id() const;
  int changes() const;  // rows the last statement changed
  const std::string& path() const { return path_; }
  Access access() const { return access_; }
  sqlite3* handle() const { return db_; }

 private:
  void open(const std::string& name, int flags);
  void close() noexcept;

  sqlite3* db_ = nullptr;
  std::string path_;
  Access access_ = Access::ReadWrite;
  // Statements kept prepared between uses, by their SQL: the store's reads
  // run the same few statements once per run, and preparing one cost more
  // than running it (a quarter of `compare --sweep` at 10^4 trials).
  std::shared_ptr<detail::StatementPool> pool_;
};

// BEGIN IMMEDIATE on construction (taking the write lock at once, so a
// transaction never fails halfway for want of it); ROLLBACK unless committed.
// Inside another transaction it is a savepoint of it.
class Transaction {
 public:
  explicit Transaction(Connection& connection);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Connection& connection_;
  bool nested_ = false;
  bool done_ = false;
};

// Turns an SQLite result code into an Error naming the database; damaged and
// foreign files get words a user can act on.
[[noreturn]] void throw_error(sqlite3* db, int code, const std::string& path, std::string_view context);

}  // namespace commtune::db

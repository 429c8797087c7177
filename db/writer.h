// The store's one writer: a background thread that owns a read-write
// connection and commits whatever producers queue, in order, in batched
// transactions (every `max_delay`, or sooner when a batch is full). Producers
// (the launcher's event subscribers, sweep schedulers) never touch SQLite;
// readers in other connections never block it (WAL).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "db/store.h"

namespace commtune::db {

struct WriterOptions {
  std::chrono::milliseconds max_delay{50};  // a queued row is committed within about this long
  std::size_t max_batch = 200000;           // rows per transaction at most
  std::size_t max_queued = 4000000;         // producers wait beyond this (memory bound)
};

struct WriterStats {
  std::uint64_t rows = 0;          // committed rows of every kind
  std::uint64_t transactions = 0;  // committed transactions
  double max_latency_s = 0;        // longest time from queueing a row to its commit
  std::uint64_t lost_step_rows = 0;  // step rows handed in that were not stored (the store stopped writing)
};

class Writer {
 public:
  // Opens (creating or migrating) the store after checking its pages
  // (Store::Check::Pages); throws db::Error as Store does.
  explicit Writer(const std::string& path, WriterOptions options = {});
  ~Writer();  // commits everything queued, then stops
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  const std::string& path() const { return path_; }

  // A statistic of a queued row: `name` is the writer's own id for a
  // statistic's name (see name_id), resolved to the store's on commit.
  struct Stat {
    std::int64_t run_id = 0;
    std::int32_t name = 0;
    std::int32_t bucket = kWholeStep;
    std::int32_t rank = 0;
    std::int64_t step = 0;
    double value = 0;
  };
  std::int32_t name_id(const std::string& stat_name);

  void add(StepRow row);
  void add(const Stat& stat);
  void add(EventRow row);

  // Runs `fn(Store&)` on the writer's thread, in order with the queued rows
  // and inside the same transaction, and hands back its result once that
  // transaction commits. If `fn` throws, only its own changes roll back and
  // the future carries the exception.
  template <class Fn>
  auto call(Fn fn) -> std::future<std::invoke_result_t<Fn, Store&>> {
    using Result = std::invoke_result_t<Fn, Store&>;
    auto promise = std::make_shared<std::promise<Result>>();
    auto future = promise->get_future();
    enqueue(Task{[promise, fn = std::move(fn)](Store& store) mutable -> std::function<void()> {
                   if constexpr (std::is_void_v<Result>) {
                     fn(store);
                     return [promise] { promise->set_value(); };
                   } else {
                     auto result = std::make_shared<Result>(fn(store));
                     return [promise, result] { promise->set_value(std::move(*result)); };
                   }
                 },
                 [promise](std::exception_ptr e) { promise->set_exception(e); }});
    return future;
  }

  // Blocks until everything queued so far is committed. Throws db::Error
  // when the writer has failed.
  void flush();
  WriterStats stats() const;
  // Why the writer stopped writing, or "" while it is healthy.
  std::string error() const;

 private:
  struct Task {
    std::function<std::function<void()>(Store&)> run;  // returns what hands out its result
    std::function<void(std::exception_ptr)> fail;
  };
  using Item = std::variant<StepRow, Stat, EventRow, Task>;

  void enqueue(Item item);
  void thread_main();
  bool commit(std::vector<Item>& batch);  // false when the writer failed for good
  // Applies one item inside the open transaction; a task's delivery (or its
  // failure) is appended to `deliveries`.
  void apply(Item& item, std::vector<std::function<void()>>& deliveries);

  std::string path_;
  WriterOptions options_;
  std::unique_ptr<Store> store_;  // used by the writer thread only

  mutable std::mutex mutex_;
  std::condition_variable wake_writer_;
  std::condition_variable wake_producers_;
  std::vector<Item> queue_;
  std::chrono::steady_clock::time_point oldest_queued_;
  std::uint64_t queued_total_ = 0;
  std::uint64_t committed_total_ = 0;  // items done (committed, or dropped after a failure)
  bool flush_requested_ = false;
  bool stopping_ = false;
  std::string error_;
  WriterStats stats_;

  std::vector<std::string> names_;                          // guarded by mutex_
  std::unordered_map<std::string, std::int32_t> name_ids_;  // guarded by mutex_
  std::vector<std::int64_t> store_ids_;                     // writer thread: names_[i] -> stat_names.id

  std::thread thread_;
};

}  // namespace commtune::db

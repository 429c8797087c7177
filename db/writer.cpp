#include "db/writer.h"

#include <algorithm>

namespace commtune::db {

namespace {

using steady = std::chrono::steady_clock;

// Another process may hold the write lock for a while (its own batch, a
// checkpoint of the WAL): try a batch this many times before giving up.
constexpr int kBusyAttempts = 6;

bool is_busy(const Error& e) { return e.code() == 5 /* SQLITE_BUSY */ || e.code() == 6 /* SQLITE_LOCKED */; }

}  // namespace

Writer::Writer(const std::string& path, WriterOptions options)
    : path_(path), options_(options), store_(std::make_unique<Store>(path, Store::Access::ReadWrite, Store::Check::Pages)) {
  thread_ = std::thread([this] { thread_main(); });
}

Writer::~Writer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_writer_.notify_all();
  thread_.join();
}

std::int32_t Writer::name_id(const std::string& stat_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = name_ids_.try_emplace(stat_name, static_cast<std::int32_t>(names_.size()));
  if (inserted) names_.push_back(stat_name);
  return it->second;
}

void Writer::add(StepRow row) { enqueue(std::move(row)); }
void Writer::add(const Stat& stat) { enqueue(stat); }
void Writer::add(EventRow row) { enqueue(std::move(row)); }

void Writer::enqueue(Item item) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!error_.empty()) {
    if (std::holds_alternative<StepRow>(item)) ++stats_.lost_step_rows;
    if (auto* task = std::get_if<Task>(&item)) {
      lock.unlock();
      task->fail(std::make_exception_ptr(Error("the run store stopped writing: " + error_)));
    }
    return;
  }
  wake_producers_.wait(lock, [this] { return queue_.size() < options_.max_queued || !error_.empty(); });
  if (queue_.empty()) oldest_queued_ = steady::now();
  queue_.push_back(std::move(item));
  ++queued_total_;
  if (queue_.size() == 1 || queue_.size() >= options_.max_batch) wake_writer_.notify_one();
}

void Writer::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto target = queued_total_;
  flush_requested_ = true;
  wake_writer_.notify_one();
  wake_producers_.wait(lock, [&] { return committed_total_ >= target; });
  if (!error_.empty()) throw Error("the run store stopped writing: " + error_);
}

WriterStats Writer::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string Writer::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void Writer::thread_main() {
  std::vector<Item> batch;
  while (true) {
    steady::time_point oldest;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (true) {
        if (stopping_ || flush_requested_ || queue_.size() >= options_.max_batch) break;
        if (queue_.empty()) {
          wake_writer_.wait(lock);
          continue;
        }
        if (wake_writer_.wait_until(lock, oldest_queued_ + options_.max_delay) == std::cv_status::timeout) break;
      }
      if (queue_.empty()) {
        flush_requested_ = false;
        wake_producers_.notify_all();
        if (stopping_) return;
        continue;
      }
      flush_requested_ = false;
      oldest = oldest_queued_;
      batch.swap(queue_);
      wake_producers_.notify_all();
    }
    const bool healthy = commit(batch);
    std::lock_guard<std::mutex> lock(mutex_);
    committed_total_ += batch.size();
    if (!healthy)
      stats_.lost_step_rows += static_cast<std::uint64_t>(
          std::count_if(batch.begin(), batch.end(), [](const Item& i) { return std::holds_alternative<StepRow>(i); }));
    if (healthy) {
      stats_.rows += batch.size();
      ++stats_.transactions;
      stats_.max_latency_s =
          std::max(stats_.max_latency_s, std::chrono::duration<double>(steady::now() - oldest).count());
    }
    batch.clear();
    wake_producers_.notify_all();
  }
}

bool Writer::commit(std::vector<Item>& batch) {
  const auto fail_tasks = [&batch](const std::string& why) {
    const auto failure = std::make_exception_ptr(Error("the run store stopped writing: " + why));
    for (auto& item : batch)
      if (auto* task = std::get_if<Task>(&item)) task->fail(failure);
  };
  if (const auto why = error(); !why.empty()) {
    fail_tasks(why);
    return false;
  }
  for (int attempt = 1;; ++attempt) {
    std::vector<std::function<void()>> deliveries;  // handed out only once the transaction commits
    std::string why;
    try {
      Transaction transaction(store_->connection());
      for (auto& item : batch) apply(item, deliveries);
      transaction.commit();
      for (auto& deliver : deliveries) deliver();
      return true;
    } catch (const Error& e) {
      store_ids_.clear();  // names added by the rolled-back transaction are gone
      if (is_busy(e) && attempt < kBusyAttempts) continue;
      why = e.what();
    } catch (const std::exception& e) {
      store_ids_.clear();
      why = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = why;
    }
    // Hand the write-ahead log's pages to the database file and truncate it,
    // so a full disk gets its room back once the store stops writing.
    try {
      store_->connection().exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } catch (const Error&) {
    }
    fail_tasks(why);
    return false;
  }
}

void Writer::apply(Item& item, std::vector<std::function<void()>>& deliveries) {
  if (auto* step = std::get_if<StepRow>(&item)) {
    store_->insert(*step);
  } else if (auto* stat = std::get_if<Stat>(&item)) {
    const auto local = static_cast<std::size_t>(stat->name);
    if (local >= store_ids_.size()) store_ids_.resize(local + 1, -1);
    if (store_ids_[local] < 0) {
      std::string name;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        name = names_.at(local);
      }
      store_ids_[local] = store_->stat_id(name);
    }
    store_->insert(StatRow{stat->run_id, store_ids_[local], stat->bucket, stat->rank, stat->step, stat->value});
  } else if (auto* event = std::get_if<EventRow>(&item)) {
    store_->insert(*event);
  } else {
    // A savepoint confines a failing task to its own changes.
    auto& task = std::get<Task>(item);
    auto& connection = store_->connection();
    connection.exec("SAVEPOINT task");
    try {
      deliveries.push_back(task.run(*store_));
      connection.exec("RELEASE task");
    } catch (const std::exception&) {
      connection.exec("ROLLBACK TO task");
      connection.exec("RELEASE task");
      deliveries.push_back([fail = task.fail, e = std::current_exception()] { fail(e); });
    }
  }
}

}  // namespace commtune::db

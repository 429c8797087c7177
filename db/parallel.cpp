#include "db/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace commtune::db {

void produce_and_process(std::size_t count, const std::function<void(std::size_t)>& produce,
                         const std::function<void(std::size_t)>& process, std::size_t chunk) {
  const std::size_t size = std::max<std::size_t>(1, chunk);
  std::size_t ready = 0;  // produced so far, under `lock`
  bool stop = false;      // a side failed: nothing more is produced or processed
  std::mutex lock;
  std::condition_variable produced;
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  const auto fail = [&] {
    const std::lock_guard<std::mutex> hold(lock);
    if (!failure) failure = std::current_exception();
    stop = true;
    produced.notify_all();
  };
  const auto work = [&] {
    try {
      for (auto start = next.fetch_add(size); start < count; start = next.fetch_add(size)) {
        const auto end = std::min(count, start + size);
        {
          std::unique_lock<std::mutex> hold(lock);
          produced.wait(hold, [&] { return stop || ready >= end; });
          if (stop) return;
        }
        for (auto i = start; i < end; ++i) process(i);
      }
    } catch (...) {
      fail();
    }
  };
  const std::size_t threads =
      std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), (count + size - 1) / size);
  std::vector<std::thread> helpers;
  try {
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  } catch (const std::system_error&) {  // no more threads to be had: those started and this one do it all
  }
  try {
    for (std::size_t i = 0; i < count; ++i) {
      produce(i);
      if ((i + 1) % size == 0 || i + 1 == count) {
        const std::lock_guard<std::mutex> hold(lock);
        if (stop) break;
        ready = i + 1;
        produced.notify_all();
      }
    }
  } catch (...) {
    fail();
  }
  work();
  for (auto& h : helpers) h.join();
  if (failure) std::rethrow_exception(failure);
}

void parallel_for(std::size_t count, const std::function<void(std::size_t)>& process, std::size_t chunk) {
  produce_and_process(
      count, [](std::size_t) {}, process, chunk);
}

}  // namespace commtune::db

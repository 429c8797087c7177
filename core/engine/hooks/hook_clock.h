// The CPU time hooks spend computing (compression, decompression), apart
// from the time they wait for collectives: the reducer times each hook's run,
// callbacks on communication threads add theirs (HookEnv::timed_then).
#pragma once

#include <atomic>
#include <cstdint>

namespace commtune {

// CPU time the calling thread has used, in nanoseconds. A thread blocked on
// a collective uses none, so CPU time counts a hook's own work only.
std::int64_t thread_cpu_ns();

// CPU time spent computing inside hooks (compression, decompression), not
// waiting for collectives. The reducer times `run`; callbacks on
// communication threads add in through HookEnv::timed_then.
class HookClock {
 public:
  void add_compute_ns(std::int64_t ns) { compute_ns_.fetch_add(ns, std::memory_order_relaxed); }
  std::int64_t compute_ns() const { return compute_ns_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> compute_ns_{0};
};

}  // namespace commtune

// What a hook is built with and reports to: its communicator, the sinks for
// its statistics (HookStats) and compute time (HookClock), the groups of
// consecutive ranks hierarchical hooks build, and the options every hook has.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/engine/dist/communicator.h"
#include "core/engine/hooks/comm_hook.h"
#include "core/engine/hooks/hook_clock.h"
#include "core/tuner/config/world_groups.h"
#include "core/tuner/schema/param_schema.h"

namespace commtune {

// Statistics a hook reports for the current step (compression numel, rate,
// residual norms, ...), whole-step and per bucket. Streamed with the step.
class HookStats {
 public:
  void set(const std::string& name, double value);
  void add(const std::string& name, double value);
  void set_bucket(std::size_t bucket, const std::string& name, double value);
  // Moves out everything recorded since the last call.
  void take(std::vector<std::pair<std::string, double>>& step,
            std::vector<std::tuple<std::size_t, std::string, double>>& buckets);

 private:
  std::mutex mutex_;
  std::map<std::string, double> step_;
  std::map<std::pair<std::size_t, std::string>, double> buckets_;
};

// What a hook is given when it is built: the communicator and the sinks for
// its statistics and timings.
struct HookEnv {
  Communicator& comm;
  HookStats& stats;
  HookClock& clock;

  int rank() const { return comm.rank(); }
  int world_size() const { return comm.size(); }

  // `then`, with the callback's time counted as hook compute.
  template <class Fn>
  Future timed_then(const Future& future, Fn fn) const {
    return then(future, [fn = std::move(fn), &clock = clock](at::Tensor t) {
      const auto start = thread_cpu_ns();
      auto out = fn(std::move(t));
      clock.add_compute_ns(thread_cpu_ns() - start);
      return out;
    });
  }
};

// This rank's group of `size` consecutive ranks (a node, a subgroup) as a
// communicator; every rank calls it alike. Checks the size first.
std::unique_ptr<Communicator> consecutive_group(Communicator& comm, int size, const std::string& field,
                                                const std::string& tag);

// Parameters every hook has: an optional compression wrapper around it.
struct HookCommonOptions {
  std::string wrapper = "none";
  static Schema<HookCommonOptions> schema();
};

}  // namespace commtune

// The communication hook interface: a bucket in, a future of the reduced
// buffer out, as in PyTorch's register_comm_hook. The hook object is the state.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Dict.h>

#include "core/ddp/grad_bucket.h"
#include "core/dist/communicator.h"
#include "core/schema/param_schema.h"

namespace commtune {

class FlatParameters;

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

class CommHook {
 public:
  virtual ~CommHook() = default;

  // Reduces one bucket. Called once per bucket, in bucket index order, from
  // one thread: every rank issues its collectives in the same order, so a
  // hook may issue several collectives and wait on them (Communicator::wait)
  // between stages. Callbacks chained on futures run on communication
  // threads and must never block. The future's value is the averaged
  // gradient buffer (any tensor with the bucket's numel; the reducer copies
  // it into the bucket if it is another).
  virtual Future run(GradBucket& bucket) = 0;

  // True when run() may wait on collectives. Such hooks run on the reducer's
  // hook thread, so backward keeps computing while they wait; the others run
  // on the autograd thread as soon as their bucket is ready, as in DDP,
  // sparing a thread hand-off per bucket.
  virtual bool may_block() const { return false; }

  // A factor the reducer applies while copying gradients into the bucket
  // (fused with the copy, saving a pass over the gradients).
  virtual double gradient_copy_scale() const { return 1.0; }

  // Hooks that also act on the parameters (model averaging in local SGD,
  // SlowMo) do it through these two. `start`: before the first step of a run
  // (not of a resumed one), with every rank's parameters equal.
  // `after_optimizer_step`: after the optimizer's update of step `step`
  // (0-based) at learning rate `lr`; every rank calls it at every step.
  virtual void start(const FlatParameters& /*parameters*/) {}
  // Before each step's backward pass: the step (0-based) and the learning
  // rate its optimizer step will use (BytePS's error feedback reads it).
  virtual void begin_step(std::int64_t /*step*/, double /*lr*/) {}
  virtual void after_optimizer_step(std::int64_t /*step*/, double /*lr*/, FlatParameters& /*parameters*/) {}
  // What a stateful hook must carry across a checkpoint (iteration counters,
  // random generator, per-bucket memories), as plain values and tensors.
  using State = c10::impl::GenericDict;
  virtual void save_state(State& /*out*/) const {}
  virtual void load_state(const State& /*in*/) {}
};

// Throws ConfigError naming `field` unless `size` divides the world size.
void check_group_size(int world_size, int size, const std::string& field);

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

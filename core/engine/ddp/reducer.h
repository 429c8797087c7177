// A bucketed gradient reducer like DDP's. Autograd hooks copy each fresh
// gradient into its bucket slice (scaled, when the hook asks), unless the
// layer computed it there (gradient_destination.h); a bucket whose
// gradients are all in is handed to the communication hook at once, so
// communication overlaps the rest of backward. Buckets are reduced in index
// order from one thread, so every rank issues its collectives in the same
// order and no communication thread is ever blocked: the autograd thread for
// hooks that never wait, a dedicated hook thread for those that may.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/Dict.h>
#include <nlohmann/json.hpp>

#include "core/engine/ddp/flat_parameters.h"
#include "core/engine/ddp/gradient_destination.h"
#include "core/engine/hooks/comm_hook.h"
#include "core/engine/hooks/hook_clock.h"
#include "core/tuner/config/run_sections.h"

namespace torch::autograd {
struct Node;
}

namespace commtune {


struct BackwardReport {
  double comm_wait_s = 0;                     // time finish_backward waited for the last buckets
  double reduced_work_s = 0;                  // of the time in finish_backward, the part in `on_reduced`
  double hook_compute_s = 0;                  // hook compute time of this step (overlaps backward)
  double hook_inline_s = 0;                   // the part of it spent on the autograd thread, inside backward
  std::vector<std::chrono::steady_clock::time_point> bucket_ready;  // when each bucket's gradients were all in
  // When the hook began on each bucket (later than ready when the hook thread
  // was busy with an earlier one) and when its result was complete: the
  // bucket's chain of hook work and collectives, in wall time.
  std::vector<std::chrono::steady_clock::time_point> bucket_began, bucket_done;
  // The hook's own work on each bucket in wall time (waiting for a core
  // included, waiting on its collectives not).
  std::vector<double> bucket_work_s;
  std::uint64_t uncompressed_wire_bytes = 0;  // fp32 ring allreduce of every bucket
  std::int64_t gradient_copy_bytes = 0;       // gradients copied into buckets (not computed there)
  bool rebuilt_buckets = false;
};

class Reducer {
 public:
  Reducer(FlatParameters& params, Communicator& comm, CommHook& hook, HookClock& clock, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Call before a step's forward pass. Arms the reducer for the backward pass
  // and clears the gradients, so autograd hands over fresh ones. Before the
  // second step it rebuilds the buckets in the order gradients became ready
  // in the first (rank 0's), as DDP does; returns true when it did. (The
  // rebuild moves parameter storage, so it must not fall between a forward
  // pass and its backward.)
  bool begin_step();
  // Waits until every bucket is reduced: the averaged gradients are then in
  // the gradient buffer and in each parameter's .grad. `on_reduced` gets each
  // bucket's range of the flat buffers (offset, elements) as soon as that
  // bucket is reduced, in bucket order, while later buckets may still
  // communicate: the optimizer's update of those parameters goes there.
  using ReducedRange = std::function<void(std::int64_t offset, std::int64_t numel)>;
  BackwardReport finish_backward(const ReducedRange& on_reduced = {});

  // Parameter indices per bucket, bucket 0 first.
  const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }
  nlohmann::json layout_json() const;
  // The last step's gradients before reduction, by parameter name; needs
  // capture_local_gradients.
  NamedTensors local_gradients() const;

  // The bucket layout and where the reducer is in DDP's rebuild sequence, for
  // checkpoints; loading re-lays out the parameters accordingly.
  void save_state(c10::impl::GenericDict& out) const;
  void load_state(const c10::impl::GenericDict& in);

 private:
  struct GradientReadyHook;

  void on_gradient_ready(std::size_t index);
  GradientDestination gradient_destination(std::size_t index);
  // Takes the buckets that became ready, in order (with mutex_ held); hands
  // them to the hook thread, or returns them to run inline.
  std::vector<std::size_t> launch_ready_buckets();
  void run_bucket(std::size_t b);  // without mutex_ held
  void hook_thread_main();
  void set_buckets(std::vector<std::vector<std::size_t>> buckets);
  void rebuild_buckets();
  GradBucket make_bucket(std::size_t b) const;
  [[noreturn]] void throw_missing_gradients() const;  // with mutex_ held

  FlatParameters& params_;
  Communicator& comm_;
  CommHook& hook_;
  HookClock& clock_;
  ReducerOptions options_;
  double copy_scale_;

  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::vector<std::int64_t> bucket_start_;
  std::vector<std::int64_t> bucket_numel_;
  std::vector<at::Tensor> grad_views_;
  at::Tensor local_grads_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool stopping_ = false;
  std::vector<std::size_t> pending_;
  std::vector<bool> param_ready_;
  std::size_t next_launch_ = 0;
  std::size_t runs_done_ = 0;
  std::deque<std::size_t> queue_;
  std::vector<Future> futures_;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::size_t> ready_order_;  // of the first step: the rebuilt layout
  std::int64_t step_ = 0;
  std::int64_t compute_ns_at_start_ = 0;
  std::int64_t inline_ns_ = 0;  // hook time on the autograd thread this step
  std::int64_t copied_bytes_ = 0;
  std::vector<std::chrono::steady_clock::time_point> bucket_ready_;
  std::vector<std::chrono::steady_clock::time_point> bucket_began_;
  std::vector<double> bucket_work_s_;
  // Set by the futures' callbacks, on whichever thread completes them; shared
  // so that a callback after an aborted step writes into its own step's record.
  std::shared_ptr<std::vector<std::atomic<std::int64_t>>> bucket_done_ns_;

  std::vector<GradientDestinationRegistration> destinations_;  // destroyed before the state its answers read
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, std::uintptr_t>> autograd_hooks_;
  std::thread hook_thread_;  // only for hooks that may block
};

}  // namespace commtune

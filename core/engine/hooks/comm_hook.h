// The communication hook contract, as PyTorch's register_comm_hook has it: a
// bucket in (GradBucket), a future of the reduced buffer out. The hook object
// is the state. What a hook is built with (its communicator, the sinks for
// its statistics and timings) is core/engine/hooks/hook_env.h.
#pragma once

#include <cstdint>

#include <ATen/core/Dict.h>

#include "core/engine/ddp/grad_bucket.h"
#include "core/engine/dist/communicator.h"

namespace commtune {

class FlatParameters;

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

}  // namespace commtune

// Local SGD: ranks step on (partially) averaged gradients and average their
// parameters every few steps instead. PyTorch's post-local SGD
// (post_localSGD_hook with a PeriodicModelAverager run after the optimizer)
// under one hook name: its arithmetic, its iteration counting.
#pragma once

#include "core/engine/hooks/default_hooks.h"
#include "core/tuner/config/world_groups.h"

namespace commtune {

// PostLocalSGDState's parameters, and PeriodicModelAverager's.
struct PostLocalSgdOptions {
  std::int64_t start_localSGD_iter = 10;
  bool post_local_gradient_allreduce = true;
  std::int64_t subgroup_size = 0;
  std::int64_t period = 4;
  std::int64_t warmup_steps = 0;
  std::string hierarchy;

  static Schema<PostLocalSgdOptions> schema();
};

void register_local_sgd_hooks(HookRegistry& registry);

// allreduce_hook's arithmetic on `comm`: divide by its size, then sum.
Future average_over(Communicator& comm, const at::Tensor& tensor);

}  // namespace commtune

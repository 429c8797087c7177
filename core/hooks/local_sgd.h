// Local SGD: ranks step on (partially) averaged gradients and average their
// parameters every few steps instead. PyTorch's post-local SGD
// (post_localSGD_hook with a PeriodicModelAverager run after the optimizer)
// under one hook name: its arithmetic, its iteration counting.
#pragma once

#include "core/hooks/default_hooks.h"

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

// One level of HierarchicalModelAverager: every `period` steps, parameters
// are averaged within groups of `group_size` consecutive ranks.
struct AveragingPeriod {
  std::int64_t period = 0;
  std::int64_t group_size = 0;
};

// hook.hierarchy ("2:2,8:4") as HierarchicalModelAverager checks it: with a
// world size (> 0), also that the group sizes divide it and the last is it.
// Throws ConfigError naming hook.hierarchy.
std::vector<AveragingPeriod> hierarchy_levels(const std::string& text, int world = 0);

void register_local_sgd_hooks(HookRegistry& registry);

// allreduce_hook's arithmetic on `comm`: divide by its size, then sum.
Future average_over(Communicator& comm, const at::Tensor& tensor);

}  // namespace commtune

// PowerSGD gradient compression (Vogels et al., 2019), layer-wise and
// batched, with the arithmetic of torch.distributed.algorithms.ddp_comm_hooks.
// powerSGD_hook and batched_powerSGD_hook and every parameter of their
// PowerSGDState. Unlike PyTorch 1.13's Python hooks it also runs on CPU under
// fp16/bf16 wrappers (the matrix work in float32 there) and with several
// buckets on Gloo (its collectives are issued in one order from the hook
// thread).
#pragma once

#include <cstdint>
#include <string>

#include "core/engine/hooks/default_hooks.h"

namespace commtune {

struct PowerSgdOptions {
  std::int64_t matrix_approximation_rank = 1;
  std::int64_t start_powerSGD_iter = 1000;
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0;
  std::int64_t random_seed = 0;
  std::int64_t compression_stats_logging_frequency = 10000;
  bool batch_tensors_with_same_shape = false;

  static Schema<PowerSgdOptions> schema();
  // PyTorch's rule: error feedback and warm start keep per-bucket state, and
  // DDP rebuilds its buckets after the first step.
  void validate() const;
};

void register_powersgd_hooks(HookRegistry& registry);

}  // namespace commtune

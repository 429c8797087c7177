// Local SGD: ranks step on (partially) averaged gradients and average their
// parameters every few steps instead. PyTorch's post-local SGD
// (post_localSGD_hook with a PeriodicModelAverager run after the optimizer)
// under one hook name: its arithmetic, its iteration counting.
#pragma once

#include "core/hooks/default_hooks.h"

namespace commtune {

void register_local_sgd_hooks(HookRegistry& registry);

// allreduce_hook's arithmetic on `comm`: divide by its size, then sum.
Future average_over(Communicator& comm, const at::Tensor& tensor);

}  // namespace commtune

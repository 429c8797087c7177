// SlowMo (Wang et al. 2020; fairscale's SlowMoDistributedDataParallel): a
// base algorithm that lets ranks drift (local SGD: average the parameters
// every localsgd_frequency steps; or SGP: one push-sum gossip round with one
// peer every step), and every slowmo_frequency steps an exact
// average followed by a slow momentum step:
//   u = beta u + (x_old - x_avg) / lr;  x_old -= alpha lr u;  x = x_old.
// In the memory-efficient form the slow momentum buffers are sharded: each
// of slowmo_num_shards ranks reduces, updates and broadcasts its portion.
#pragma once

#include "core/engine/hooks/default_hooks.h"

namespace commtune {

void register_slowmo_hooks(HookRegistry& registry);

}  // namespace commtune

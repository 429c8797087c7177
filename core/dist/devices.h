// Which devices ranks train on.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace commtune {

// GPUs this build can see (0 with a CPU-only libtorch).
int cuda_device_count();

// The device of the rank with `local_rank` for a "device" choice (auto, cpu,
// cuda), selecting it as the current CUDA device. Throws ConfigError when
// cuda is asked for but missing.
c10::Device device_for_rank(const std::string& choice, int local_rank);

// world_size 0 means one rank per GPU (device auto/cuda with GPUs), else 2.
int resolve_world_size(std::int64_t world_size, const std::string& device);

}  // namespace commtune

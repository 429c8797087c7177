// Which devices ranks train on.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace commtune {

// GPUs this build can see (0 with a CPU-only libtorch).
int cuda_device_count();

// The device of the rank with `local_rank` for a "device" choice (auto, cpu,
// cuda) and a "backend" choice (auto, nccl, gloo), selecting it as the
// current CUDA device. Under NCCL each local rank needs a GPU of its own;
// under Gloo ranks share the GPUs round-robin. Throws ConfigError when cuda
// (or nccl) is asked for but missing, or a rank has no GPU.
c10::Device device_for_rank(const std::string& choice, const std::string& backend, int local_rank);

// Whether a rank on `device` builds its process group on Gloo for a
// "backend" choice: auto is NCCL on a GPU and Gloo on the CPU.
bool uses_gloo(const std::string& backend, const c10::Device& device);

}  // namespace commtune

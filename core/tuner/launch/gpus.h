// The GPUs a job's ranks can have, found without CUDA: the tuner starts
// workers as torchrun's launcher does, never touching the accelerator
// itself. The worker finds its own device (core/engine/dist/devices.h).
#pragma once

#include <cstdint>
#include <string>

namespace commtune {

// 0 when the engine is built without CUDA; else the NVIDIA GPUs the driver
// shows (/proc/driver/nvidia/gpus, or /dev/nvidiaN in a container without
// /proc's view), narrowed as CUDA narrows them by $CUDA_VISIBLE_DEVICES (a
// list that stops at its first entry that names no GPU; empty: none).
int visible_gpus();

// world_size 0 means one rank per GPU (device auto/cuda with GPUs), else 2.
// Throws ConfigError when device is cuda and no GPU is visible.
int resolve_world_size(std::int64_t world_size, const std::string& device);

}  // namespace commtune

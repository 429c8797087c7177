#include "core/engine/dist/devices.h"

#include "core/tuner/schema/param_schema.h"

#if defined(COMMTUNE_TORCH_HAS_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace commtune {

int cuda_device_count() {
#if defined(COMMTUNE_TORCH_HAS_CUDA)
  return static_cast<int>(c10::cuda::device_count());
#else
  return 0;
#endif
}

c10::Device device_for_rank(const std::string& choice, const std::string& backend, int local_rank) {
  const int gpus = cuda_device_count();
  if (choice == "cpu" || (choice == "auto" && gpus == 0)) {
    if (backend == "nccl")
      throw ConfigError("backend", "is nccl, but this build or machine has no CUDA device: set backend=gloo or auto");
    return c10::Device(c10::kCPU);
  }
  if (gpus == 0) throw ConfigError("device", "cuda was asked for, but this build or machine has no CUDA device");
  const bool shared = backend == "gloo";
  if (local_rank >= gpus && !shared)
    throw ConfigError("world_size", "local rank " + std::to_string(local_rank) + " has no GPU of its own (" +
                                        std::to_string(gpus) + " visible); NCCL needs one GPU per rank, "
                                        "backend=gloo lets ranks share them");
  const auto index = static_cast<c10::DeviceIndex>(local_rank % gpus);
#if defined(COMMTUNE_TORCH_HAS_CUDA)
  c10::cuda::set_device(index);
#endif
  return c10::Device(c10::kCUDA, index);
}

bool uses_gloo(const std::string& backend, const c10::Device& device) {
  return backend == "gloo" || (backend == "auto" && !device.is_cuda());
}

}  // namespace commtune

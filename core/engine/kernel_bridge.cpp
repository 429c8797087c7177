#include "core/engine/kernel_bridge.h"

#if defined(COMMTUNE_TORCH_HAS_CUDA)
#include <c10/cuda/CUDAStream.h>
#endif

namespace commtune {

kernels::Device kernel_device(const at::Tensor& tensor) {
  return tensor.is_cuda() ? kernels::Device::Cuda : kernels::Device::Cpu;
}

void* kernel_stream(const at::Tensor& tensor) {
#if defined(COMMTUNE_TORCH_HAS_CUDA)
  if (tensor.is_cuda()) return c10::cuda::getCurrentCUDAStream(tensor.device().index()).stream();
#endif
  (void)tensor;
  return nullptr;
}

}  // namespace commtune

// What every CUDA kernel launch here shares: the block size, a grid that
// covers n elements (capped, with grid-stride loops beyond), and turning a
// failed launch into an exception.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace commtune::kernels::cuda {

constexpr int kThreads = 256;

inline int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

}  // namespace commtune::kernels::cuda

// CUDA twins of the CPU kernels. Intrinsics with explicit rounding (__fmul_rn,
// __fadd_rn, __fmaf_rn, ...) stop nvcc from contracting, so every element
// rounds exactly like the CPU version.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/bf16.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/kernels.h"

namespace commtune::kernels::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

__global__ void sgd_kernel(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ buf,
                           std::int64_t n, SgdStep h) {
  const bool decay = h.weight_decay != 0.0f, use_momentum = h.momentum != 0.0f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float d = decay ? __fmaf_rn(param[i], h.weight_decay, grad[i]) : grad[i];
    if (use_momentum) {
      const float b = h.first_step ? d : __fmaf_rn(d, h.one_minus_dampening, __fmul_rn(buf[i], h.momentum));
      buf[i] = b;
      d = h.nesterov ? __fmaf_rn(b, h.momentum, d) : b;
    }
    param[i] = __fmaf_rn(d, -h.lr, param[i]);
  }
}

__global__ void adam_kernel(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ exp_avg,
                            float* __restrict__ exp_avg_sq, std::int64_t n, AdamStep h) {
  const bool decay = h.weight_decay != 0.0f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = decay ? __fmaf_rn(param[i], h.weight_decay, grad[i]) : grad[i];
    const float m = __fmaf_rn(g, h.one_minus_beta1, __fmul_rn(exp_avg[i], h.beta1));
    const float v = __fmaf_rn(__fmul_rn(h.one_minus_beta2, g), g, __fmul_rn(exp_avg_sq[i], h.beta2));
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), h.bias_correction2_sqrt), h.eps);
    param[i] = __fadd_rn(param[i], __fdiv_rn(__fmul_rn(h.neg_step_size, m), denom));
  }
}

__global__ void sum_bf16_rows_kernel(const std::uint16_t* __restrict__ rows, std::int64_t row_count, std::int64_t n,
                                     std::uint16_t* __restrict__ out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float acc = bf16_to_float(rows[i]);
    for (std::int64_t r = 1; r < row_count; ++r) acc = __fadd_rn(acc, bf16_to_float(rows[r * n + i]));
    out[i] = float_to_bf16(acc);
  }
}

}  // namespace

void sgd_step(float* param, const float* grad, float* buf, std::int64_t n, const SgdStep& h, void* stream) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(param, grad, buf, n, h);
  check_launch("sgd_step");
}

void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n, const AdamStep& h,
               void* stream) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(param, grad, exp_avg, exp_avg_sq, n,
                                                                                 h);
  check_launch("adam_step");
}

void sum_bf16_rows(const std::uint16_t* rows, std::int64_t row_count, std::int64_t n, std::uint16_t* out,
                   void* stream) {
  if (n == 0) return;
  sum_bf16_rows_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(rows, row_count, n, out);
  check_launch("sum_bf16_rows");
}

}  // namespace commtune::kernels::cuda

// CUDA twins of the CPU kernels. Intrinsics with explicit rounding (__fmul_rn,
// __fadd_rn, __fmaf_rn, ...) stop nvcc from contracting, so every element
// rounds exactly like the CPU version.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/kernels.h"

namespace commtune::kernels::cuda {

namespace {

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
    const float w = h.one_minus_beta1, m0 = exp_avg[i];
    const float m = !h.lerp_first_moment ? __fmaf_rn(g, w, __fmul_rn(m0, h.beta1))
                    : fabsf(w) < 0.5f    ? __fmaf_rn(w, __fsub_rn(g, m0), m0)
                                         : __fmaf_rn(__fsub_rn(w, 1.0f), __fsub_rn(g, m0), g);
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

__global__ void add_into_both_kernel(float* __restrict__ gradient, float* __restrict__ error, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float x = __fadd_rn(gradient[i], error[i]);
    gradient[i] = x;
    error[i] = x;
  }
}

// error = x - approximation; per-block sums of squares (double) into `sums`.
__global__ void subtract_and_square_kernel(float* __restrict__ error, const float* __restrict__ approximation,
                                           std::int64_t n, double* __restrict__ sums) {
  __shared__ double block[kThreads];
  double acc = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float e = __fsub_rn(error[i], approximation[i]);
    error[i] = e;
    acc += static_cast<double>(e) * e;
  }
  block[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) block[threadIdx.x] += block[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = block[0];
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

void add_into_both(float* gradient, float* error, std::int64_t n, void* stream) {
  if (n == 0) return;
  add_into_both_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(gradient, error, n);
  check_launch("add_into_both");
}

double subtract_and_square_sum(float* error, const float* approximation, std::int64_t n, void* stream) {
  if (n == 0) return 0;
  const int blocks = blocks_for(n);
  double* sums = nullptr;
  const auto s = static_cast<cudaStream_t>(stream);
  if (cudaMallocAsync(reinterpret_cast<void**>(&sums), blocks * sizeof(double), s) != cudaSuccess)
    throw std::runtime_error("subtract_and_square_sum: cannot allocate partial sums");
  subtract_and_square_kernel<<<blocks, kThreads, 0, s>>>(error, approximation, n, sums);
  check_launch("subtract_and_square_sum");
  std::vector<double> host(blocks);
  const auto copied = cudaMemcpyAsync(host.data(), sums, blocks * sizeof(double), cudaMemcpyDeviceToHost, s);
  cudaFreeAsync(sums, s);
  if (copied != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess)
    throw std::runtime_error("subtract_and_square_sum: copying the partial sums failed");
  double total = 0;
  for (double x : host) total += x;
  return total;
}

}  // namespace commtune::kernels::cuda

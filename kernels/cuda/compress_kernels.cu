// CUDA twins of the compressors' element-wise kernels (kernels/compress.h).
// Every element rounds as on the CPU: explicit round-to-nearest intrinsics,
// no contraction (--fmad=false), the same integer hash for dithering's draws.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/compress.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/dithering_draw.h"

namespace commtune::kernels::cuda {

namespace {

#define COMMTUNE_GRID_LOOP(i, n)                                                                   \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// A warp's 32 sign bits (x < 0) with one ballot; past n, +0 (as the CPU's zero padding).
__global__ void onebit_signs_kernel(const float* __restrict__ x, std::int64_t n, std::uint32_t* __restrict__ words) {
  const std::int64_t padded = (n + 31) / 32 * 32;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t base = blockIdx.x * static_cast<std::int64_t>(blockDim.x); base < padded; base += stride) {
    const std::int64_t i = base + threadIdx.x;
    const bool negative = i < n && x[i] < 0.0f;  // as BytePS: -0 and NaN positive
    const std::uint32_t word = __ballot_sync(0xffffffffu, negative);
    if ((threadIdx.x & 31) == 0 && i < padded) words[i / 32] = word;
  }
}

__global__ void onebit_unpack_add_kernel(const std::uint32_t* __restrict__ words, std::int64_t n, float plus,
                                         float* __restrict__ out) {
  COMMTUNE_GRID_LOOP(i, n) {
    const bool negative = (words[i / 32] >> (i % 32)) & 1u;
    out[i] = __fadd_rn(out[i], negative ? -plus : plus);
  }
}

__global__ void gather_scaled_kernel(const float* __restrict__ x, const std::uint32_t* __restrict__ indices,
                                     std::int64_t k, float scale, float* __restrict__ values) {
  COMMTUNE_GRID_LOOP(j, k) { values[j] = __fmul_rn(x[indices[j]], scale); }
}

__global__ void scatter_add_kernel(const std::uint32_t* __restrict__ indices, const float* __restrict__ values,
                                   std::int64_t k, float weight, float* __restrict__ out) {
  COMMTUNE_GRID_LOOP(j, k) { atomicAdd(out + indices[j], __fmul_rn(values[j], weight)); }
}

__device__ float level_value(int q, int levels, bool natural) {
  if (q == 0) return 0.0f;
  return natural ? ldexpf(1.0f, q - levels) : __fdiv_rn(static_cast<float>(q), static_cast<float>(levels));
}

__global__ void dithering_levels_kernel(const float* __restrict__ x, std::int64_t first, std::int64_t count,
                                        float inverse, int levels, bool natural, std::uint64_t key,
                                        std::uint8_t* __restrict__ q) {
  const float top = __fmul_rn(static_cast<float>(levels), kFixedOne), scale = __fmul_rn(inverse, top);
  COMMTUNE_GRID_LOOP(j, count) {
    const auto i = static_cast<std::uint32_t>(first + j);
    if (!natural) {
      float scaled = __fmul_rn(fabsf(x[first + j]), scale);
      scaled = scaled < top ? scaled : top;
      q[j] = static_cast<std::uint8_t>(linear_level(__float2int_rz(scaled), dithering_draw_bits(i, key)));
      continue;
    }
    float a = __fmul_rn(fabsf(x[first + j]), inverse);
    a = a < 1.0f ? a : 1.0f;
    const float u = dithering_draw(i, key);
    if (a <= 0.0f) {
      q[j] = 0;
      continue;
    }
    int exponent = 0;
    frexpf(a, &exponent);
    int level = exponent - 1 + levels;
    level = level < 0 ? 0 : (level > levels ? levels : level);
    if (level == levels) {
      q[j] = static_cast<std::uint8_t>(level);
      continue;
    }
    const float low = level_value(level, levels, true), high = level_value(level + 1, levels, true);
    q[j] = static_cast<std::uint8_t>(level + (u < __fdiv_rn(__fsub_rn(a, low), __fsub_rn(high, low)) ? 1 : 0));
  }
}

// onebit's scale, pass one: a thread per (4096-element block, lane j < 64)
// sums |x| of the block's elements j, j + 64, ... in order, as the CPU's
// lane does; lanes 0..15 of a block then fold their four lanes as the CPU.
__global__ void onebit_lanes_kernel(const float* __restrict__ x, std::int64_t n, float* __restrict__ partial) {
  __shared__ float lanes[64];
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(4096);
  const int j = threadIdx.x;
  float sum = 0.0f;
  for (std::int64_t i = first + j; i < first + 4096 && i < n; i += 64) sum = __fadd_rn(sum, fabsf(x[i]));
  lanes[j] = sum;
  __syncthreads();
  if (j < 16)
    partial[16 * blockIdx.x + j] = __fadd_rn(__fadd_rn(lanes[j], lanes[j + 16]), __fadd_rn(lanes[j + 32], lanes[j + 48]));
}

// Pass two, one thread: the folds into a double in block and lane order.
__global__ void onebit_fold_kernel(const float* __restrict__ partial, std::int64_t count, std::int64_t n, bool scaled,
                                   float* __restrict__ scale) {
  double sum = 0;
  for (std::int64_t i = 0; i < count; ++i) sum = __dadd_rn(sum, static_cast<double>(partial[i]));
  *scale = scaled && n > 0 ? static_cast<float>(__ddiv_rn(sum, static_cast<double>(n))) : 1.0f;
}

__global__ void nesterov_fold_kernel(float* __restrict__ x, float* __restrict__ momentum, std::int64_t n, float mu) {
  COMMTUNE_GRID_LOOP(i, n) {
    const float m = __fadd_rn(__fmul_rn(mu, momentum[i]), x[i]);
    momentum[i] = m;
    x[i] = __fadd_rn(x[i], __fmul_rn(mu, m));
  }
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

void onebit_signs(const float* x, std::int64_t n, std::uint32_t* words, void* stream) {
  if (n == 0) return;
  onebit_signs_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, n, words);
  check_launch("onebit_signs");
}

void onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out,
                       void* stream) {
  if (n == 0) return;
  const float plus = scale * weight;  // on the host, as the CPU kernel does
  onebit_unpack_add_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(words, n, plus, out);
  check_launch("onebit_unpack_add");
}

void gather_scaled(const float* x, const std::uint32_t* indices, std::int64_t k, float scale, float* values,
                   void* stream) {
  if (k == 0) return;
  gather_scaled_kernel<<<blocks_for(k), kThreads, 0, as_stream(stream)>>>(x, indices, k, scale, values);
  check_launch("gather_scaled");
}

void scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out,
                 void* stream) {
  if (k == 0) return;
  scatter_add_kernel<<<blocks_for(k), kThreads, 0, as_stream(stream)>>>(indices, values, k, weight, out);
  check_launch("scatter_add");
}

void onebit_scale(const float* x, std::int64_t n, bool scaled, float* partial, float* scale, void* stream) {
  const std::int64_t blocks = (n + 4095) / 4096;
  if (blocks > 0) {
    onebit_lanes_kernel<<<static_cast<unsigned>(blocks), 64, 0, as_stream(stream)>>>(x, n, partial);
    check_launch("onebit_lanes");
  }
  onebit_fold_kernel<<<1, 1, 0, as_stream(stream)>>>(partial, 16 * blocks, n, scaled, scale);
  check_launch("onebit_fold");
}

void nesterov_fold(float* x, float* momentum, std::int64_t n, float mu, void* stream) {
  if (n == 0) return;
  nesterov_fold_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, momentum, n, mu);
  check_launch("nesterov_fold");
}

void dithering_levels(const float* x, std::int64_t first, std::int64_t count, float inverse,
                      const DitheringOptions& options, std::uint64_t key, std::uint8_t* q, void* stream) {
  if (count == 0) return;
  dithering_levels_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(
      x, first, count, inverse, static_cast<int>(options.levels), options.natural, key, q);
  check_launch("dithering_levels");
}

}  // namespace commtune::kernels::cuda

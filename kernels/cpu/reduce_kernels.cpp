#include "kernels/bf16.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/kernels.h"

namespace commtune::kernels::cpu {

COMMTUNE_CPU_CLONES
void sum_bf16_rows(const std::uint16_t* __restrict rows, std::int64_t row_count, std::int64_t n,
                   std::uint16_t* __restrict out) {
  // Blocked so the float accumulators stay in registers/L1 while rows stream by.
  constexpr std::int64_t kBlock = 1024;
  float acc[kBlock];
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t len = std::min(kBlock, n - start);
    for (std::int64_t i = 0; i < len; ++i) acc[i] = bf16_to_float(rows[start + i]);
    for (std::int64_t r = 1; r < row_count; ++r) {
      const std::uint16_t* row = rows + r * n + start;
      for (std::int64_t i = 0; i < len; ++i) acc[i] += bf16_to_float(row[i]);
    }
    for (std::int64_t i = 0; i < len; ++i) out[start + i] = float_to_bf16(acc[i]);
  }
}

COMMTUNE_CPU_CLONES
void add_into_both(float* __restrict gradient, float* __restrict error, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = gradient[i] + error[i];
    gradient[i] = x;
    error[i] = x;
  }
}

COMMTUNE_CPU_CLONES
double subtract_and_square_sum(float* __restrict error, const float* __restrict approximation, std::int64_t n) {
  // Sixteen partial sums: the loop vectorises into four independent vector
  // additions (one would wait on its own latency every four elements); their
  // order is fixed, so the result is deterministic.
  constexpr int kPartials = 16;
  double partial[kPartials] = {};
  std::int64_t i = 0;
  for (; i + kPartials <= n; i += kPartials)
    for (int k = 0; k < kPartials; ++k) {
      const float e = error[i + k] - approximation[i + k];
      error[i + k] = e;
      partial[k] += static_cast<double>(e) * e;
    }
  for (; i < n; ++i) {
    const float e = error[i] - approximation[i];
    error[i] = e;
    partial[0] += static_cast<double>(e) * e;
  }
  for (int width = kPartials / 2; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) partial[k] += partial[k + width];
  return partial[0];
}

}  // namespace commtune::kernels::cpu

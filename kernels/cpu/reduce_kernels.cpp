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

}  // namespace commtune::kernels::cpu

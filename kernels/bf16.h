// bfloat16 <-> float conversions shared by the CPU and CUDA kernels.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define COMMTUNE_HD __host__ __device__ __forceinline__
#else
#define COMMTUNE_HD inline
#endif

namespace commtune::kernels {

COMMTUNE_HD float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

// Round to nearest even; NaN stays a quiet NaN (as c10::BFloat16 does).
COMMTUNE_HD std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

}  // namespace commtune::kernels

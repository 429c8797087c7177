#include "kernels/cpu/dispatch.h"

namespace commtune::kernels {

std::vector<cpu::SimdBuild> cpu::simd_builds() {
  std::vector<SimdBuild> builds{SimdBuild::portable};
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2")) {
    builds.push_back(SimdBuild::avx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
      builds.push_back(SimdBuild::avx512);
  }
#endif
  return builds;
}

const char* cpu::name_of(SimdBuild build) {
  switch (build) {
    case SimdBuild::avx2:
      return "avx2";
    case SimdBuild::avx512:
      return "avx512";
    case SimdBuild::portable:
      break;
  }
  return "portable";
}

}  // namespace commtune::kernels

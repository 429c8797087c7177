#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

#include <cstring>
#endif

namespace commtune::kernels {

bool cpu::bit_deposit_is_microcoded(std::string_view vendor, unsigned family) {
  return (vendor == "AuthenticAMD" || vendor == "HygonGenuine") && family < 0x19;
}

cpu::SimdBuild cpu::bit_coder_build() {
  static const SimdBuild build = [] {
    const SimdBuild fastest = simd_builds().back();
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (fastest == SimdBuild::portable || !__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return fastest;
    char vendor[12];
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return fastest;
    const unsigned base = (eax >> 8) & 0xfu, family = base == 0xfu ? base + ((eax >> 20) & 0xffu) : base;
    if (bit_deposit_is_microcoded(std::string_view(vendor, sizeof vendor), family)) return SimdBuild::portable;
#endif
    return fastest;
  }();
  return build;
}

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

// Declarations of the CPU implementations and the function-multiversioning
// attribute: an AVX2/FMA clone and a portable one, picked at load time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/compress.h"
#include "kernels/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COMMTUNE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
// With an AVX-512 clone too: for element-wise loops only (a reduction's
// order, and so its rounding, would change with the vector width), where it
// pays: dithering's levels, 0.36 -> 0.15 ns per element on Zen 5.
#define COMMTUNE_CPU_CLONES_AVX512 __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define COMMTUNE_CPU_CLONES
#define COMMTUNE_CPU_CLONES_AVX512
#endif

namespace commtune::kernels::cpu {
void sgd_step(float* param, const float* grad, float* buf, std::int64_t n, const SgdStep& h);
void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n, const AdamStep& h);
void adam_moments(const float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n,
                  const AdamStep& h);
void adam_apply(float* param, const float* exp_avg, const float* root, std::int64_t n, const AdamStep& h);
void sum_bf16_rows(const std::uint16_t* rows, std::int64_t row_count, std::int64_t n, std::uint16_t* out);
void add_into_both(float* gradient, float* error, std::int64_t n);
double subtract_and_square_sum(float* error, const float* approximation, std::int64_t n);
void onebit_signs(const float* x, std::int64_t n, std::uint32_t* words);
void onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out);
void scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out);
void gather_scaled(const float* x, const std::uint32_t* indices, std::int64_t k, float scale, float* values);
// Nesterov momentum folded into x: m = mu m + x; x += mu m (the compressors'
// momentum decorator).
void nesterov_fold(float* x, float* momentum, std::int64_t n, float mu);
void onebit_scale(const float* x, std::int64_t n, bool scaled, float* partial, float* scale);
void dithering_levels(const float* x, std::int64_t first, std::int64_t count, float inverse,
                      const DitheringOptions& options, std::uint64_t key, std::uint8_t* q);
// The builds of the streaming and bit-packing kernels (topk's candidate
// scan, onebit, dithering), with the same results from each: portable, AVX2 (+ BMI2) and AVX-512 (x86-64). The
// kernels:: entry points take the last this CPU runs; tests and benchmarks call each.
enum class SimdBuild { portable, avx2, avx512 };
std::vector<SimdBuild> simd_builds();
const char* name_of(SimdBuild build);
// The build the bit coders (dithering's stream) run here: the last of
// simd_builds(), but portable where BMI2's pdep and pext are microcoded
// (AMD below family 19h, i.e. before Zen 3, and Hygon): their cost grows
// with the mask's set bits, hundreds of cycles for a chunk's mask, where
// the portable loops take tens.
SimdBuild bit_coder_build();
bool bit_deposit_is_microcoded(std::string_view cpuid_vendor, unsigned family);
void topk_select(SimdBuild build, const float* x, std::int64_t n, std::int64_t k, std::uint32_t* indices,
                 float* values);
float onebit_pack(SimdBuild build, const float* x, std::int64_t n, bool scaled, std::uint32_t* words);
void onebit_unpack(SimdBuild build, bool accumulate, const std::uint32_t* words, std::int64_t n, float scale,
                   float weight, float* out);
std::size_t dithering_encode(SimdBuild build, const float* x, std::int64_t n, const DitheringOptions& options,
                             Xorshift128p& rng, std::uint8_t* out);
void dithering_decode(SimdBuild build, bool accumulate, const std::uint8_t* in, std::size_t bytes, std::int64_t n,
                      const DitheringOptions& options, float weight, float* out);
}  // namespace commtune::kernels::cpu

#if defined(COMMTUNE_HAVE_CUDA_KERNELS)
namespace commtune::kernels::cuda {
void sgd_step(float* param, const float* grad, float* buf, std::int64_t n, const SgdStep& h, void* stream);
void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n, const AdamStep& h,
               void* stream);
void sum_bf16_rows(const std::uint16_t* rows, std::int64_t row_count, std::int64_t n, std::uint16_t* out, void* stream);
void add_into_both(float* gradient, float* error, std::int64_t n, void* stream);
double subtract_and_square_sum(float* error, const float* approximation, std::int64_t n, void* stream);
void onebit_signs(const float* x, std::int64_t n, std::uint32_t* words, void* stream);
void onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out, void* stream);
void gather_scaled(const float* x, const std::uint32_t* indices, std::int64_t k, float scale, float* values,
                   void* stream);
void scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out,
                 void* stream);
void dithering_levels(const float* x, std::int64_t first, std::int64_t count, float inverse,
                      const DitheringOptions& options, std::uint64_t key, std::uint8_t* q, void* stream);
void nesterov_fold(float* x, float* momentum, std::int64_t n, float mu, void* stream);
void onebit_scale(const float* x, std::int64_t n, bool scaled, float* partial, float* scale, void* stream);
}  // namespace commtune::kernels::cuda
#endif

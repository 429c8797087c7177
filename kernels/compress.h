// Gradient compressors' kernels, BytePS-style (docs/compressors.md has the
// wire formats). Raw pointers and sizes: core/compress wraps them. The
// entropy coding is CPU only; the element-wise parts have CUDA twins (below),
// which the compressed hook's device path (core/engine/compress/device_compressor)
// runs on a GPU bucket.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace commtune::kernels {

// xorshift128+, seeded through splitmix64: the generator randomk and
// dithering draw from. Plain data so hooks can checkpoint it.
struct Xorshift128p {
  std::uint64_t s0 = 0, s1 = 0;
  static Xorshift128p seeded(std::uint64_t seed);
  // BytePS's set_seed: the state {seed, seed}, the same on every worker and
  // server that is given the seed (byteps/common/compressor/utils.h).
  static Xorshift128p bytepss(std::uint64_t seed) { return {seed, seed}; }
  std::uint64_t next() {
    std::uint64_t a = s0;
    const std::uint64_t b = s1;
    s0 = b;
    a ^= a << 23;
    s1 = a ^ b ^ (a >> 17) ^ (b >> 26);
    return s1 + b;
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

// onebit: ceil(n/32) words, bit i%32 of word i/32 set when x[i] < 0 (BytePS's
// test: -0 and NaN decode as +scale).
// Returns the scale: mean |x| when `scaled`, else 1.
float onebit_pack(const float* x, std::int64_t n, bool scaled, std::uint32_t* words);
// out[i] += (bit set ? -scale : scale) * weight
void onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out);
// out[i] = (bit set ? -scale : scale) * weight
void onebit_unpack(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out);

// topk: the indices of the k largest |x| (ties: the lower index first),
// ascending; writes k (index, value) pairs.
void topk_select(const float* x, std::int64_t n, std::int64_t k, std::uint32_t* indices, float* values);
// randomk's draws: k indices in [0, n), with replacement, from `rng`, as
// BytePS's Randint(0, n) takes them: next() % n.
void randomk_indices(std::int64_t n, std::int64_t k, Xorshift128p& rng, std::uint32_t* indices);
// randomk: k indices drawn uniformly with replacement; writes the pairs,
// values multiplied by `scale` (n/k for an unbiased estimate, or 1).
void randomk_select(const float* x, std::int64_t n, std::int64_t k, float scale, Xorshift128p& rng,
                    std::uint32_t* indices, float* values);
// out[index[j]] += values[j] * weight
void scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out);

// dithering: each |x_i| / norm quantised to one of s levels by stochastic
// rounding (unbiased), linear {0, 1/s, .., 1} or natural {0, 2^(1-s), .., 1};
// norm = max |x| or ||x||_2. The nonzero levels are entropy-coded: their
// positions as Rice codes of the index gaps (a bitmap when dense), then per
// 64-element chunk their signs and their levels' truncated unary codes, bit
// plane by bit plane (docs/compressors.md has the layout).
struct DitheringOptions {
  std::int64_t levels = 2;  // s
  bool natural = false;
  bool l2_norm = false;
};
// Bytes the encoding of n elements can take at most.
std::size_t dithering_max_bytes(std::int64_t n, const DitheringOptions& options);
// Returns the bytes written. Takes one draw from `rng` per call: the key of
// a hash that gives element i its rounding draw (so the draws do not depend
// on the order of the elements).
std::size_t dithering_encode(const float* x, std::int64_t n, const DitheringOptions& options, Xorshift128p& rng,
                             std::uint8_t* out);
// out[i] = decoded[i] * weight
void dithering_decode(const std::uint8_t* in, std::size_t bytes, std::int64_t n, const DitheringOptions& options,
                      float weight, float* out);
// out[i] += decoded[i] * weight
void dithering_decode_add(const std::uint8_t* in, std::size_t bytes, std::int64_t n, const DitheringOptions& options,
                          float weight, float* out);

// onebit's scale without packing: what onebit_pack returns, summed in its
// order (64 float lanes per 4096-element block, folded into a double), so a
// bucket on a GPU gets the CPU's bits. `partial` is scratch on the same
// device, onebit_scale_scratch(n) floats; the scale lands in *scale there
// (no copy to the host).
std::int64_t onebit_scale_scratch(std::int64_t n);
void onebit_scale(Device device, const float* x, std::int64_t n, bool scaled, float* partial, float* scale,
                  void* stream = nullptr);
// Nesterov momentum folded into x, element by element: m = mu m + x; x += mu m.
void nesterov_fold(Device device, float* x, float* momentum, std::int64_t n, float mu, void* stream = nullptr);

// The element-wise parts of the compressors, on the CPU or on a CUDA device
// (pointers into that device's memory; kernels/cuda/compress_kernels.cu),
// with the same bits from both (tests/gpu/gpu_kernel_check.cpp):
//   onebit_signs: the sign words of onebit_pack;
//   onebit_unpack_add as above;
//   gather_scaled: values[j] = x[indices[j]] * scale (topk's and randomk's values);
//   scatter_add as above (the same bits when the indices are distinct, as
//     topk's are; randomk's repeats add in another order on a GPU);
//   dithering_levels: the level of x[first, first + count) (as dithering_encode
//     quantises, with `key` its per-call draw) into q[0, count).
void onebit_signs(Device device, const float* x, std::int64_t n, std::uint32_t* words, void* stream = nullptr);
void onebit_unpack_add(Device device, const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out,
                       void* stream = nullptr);
void gather_scaled(Device device, const float* x, const std::uint32_t* indices, std::int64_t k, float scale,
                   float* values, void* stream = nullptr);
void scatter_add(Device device, const std::uint32_t* indices, const float* values, std::int64_t k, float weight,
                 float* out, void* stream = nullptr);
void dithering_levels(Device device, const float* x, std::int64_t first, std::int64_t count, float inverse,
                      const DitheringOptions& options, std::uint64_t key, std::uint8_t* q, void* stream = nullptr);

}  // namespace commtune::kernels

// onebit on the CPU: signs packed 32 to a word with the mean magnitude, and
// their unpacking, portable (SSE2 on x86-64) and with AVX2, with the same
// bits from both.
//
// The magnitudes are summed in one order on every build, so a scale does not
// depend on the CPU that made it: 64 float lanes, lane j taking the elements
// i = j (mod 64) of a 4096-element block in turn; a block's lanes fold to 16
// as (l[j] + l[j+16]) + (l[j+32] + l[j+48]), added into a double in lane
// order. 64 lanes keep eight AVX2 additions independent.
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/compress.h"
#include "kernels/cpu/dispatch.h"

namespace commtune::kernels {

namespace {

constexpr std::int64_t kLanes = 64;
constexpr std::int64_t kBlockChunks = 64;  // 64-element chunks per block

#if defined(__SSE2__)
namespace sse2 {
#define COMMTUNE_ONEBIT_WIDTH 4
#include "kernels/cpu/onebit_pack.inc"
#undef COMMTUNE_ONEBIT_WIDTH
}  // namespace sse2
#endif

// Signs of `chunks` 64-element chunks into 2 words each; |x| into lanes[64].
// The portable build: SSE2 where the target has it (all of x86-64), else scalar.
void pack_portable(const float* x, std::int64_t chunks, std::uint32_t* words, float* lanes) {
#if defined(__SSE2__)
  sse2::pack(x, chunks, words, lanes);
#else
  for (std::int64_t c = 0; c < chunks; ++c, x += kLanes, words += 2) {
    std::uint32_t word[2] = {};
    for (int j = 0; j < kLanes; ++j) {
      word[j / 32] |= static_cast<std::uint32_t>(x[j] < 0.0f) << (j % 32);  // as BytePS: -0 and NaN positive
      lanes[j] += std::fabs(x[j]);
    }
    words[0] = word[0];
    words[1] = word[1];
  }
#endif
}

template <bool kAccumulate>
void unpack_portable(const std::uint32_t* words, std::int64_t count, float plus, float* out) {
#if defined(__SSE2__)
  // Four bits at a time pick four sign masks, XORed onto +plus.
  alignas(16) static const std::uint32_t kSignMasks[16][4] = {{0, 0, 0, 0},
                                                              {1u << 31, 0, 0, 0},
                                                              {0, 1u << 31, 0, 0},
                                                              {1u << 31, 1u << 31, 0, 0},
                                                              {0, 0, 1u << 31, 0},
                                                              {1u << 31, 0, 1u << 31, 0},
                                                              {0, 1u << 31, 1u << 31, 0},
                                                              {1u << 31, 1u << 31, 1u << 31, 0},
                                                              {0, 0, 0, 1u << 31},
                                                              {1u << 31, 0, 0, 1u << 31},
                                                              {0, 1u << 31, 0, 1u << 31},
                                                              {1u << 31, 1u << 31, 0, 1u << 31},
                                                              {0, 0, 1u << 31, 1u << 31},
                                                              {1u << 31, 0, 1u << 31, 1u << 31},
                                                              {0, 1u << 31, 1u << 31, 1u << 31},
                                                              {1u << 31, 1u << 31, 1u << 31, 1u << 31}};
  const __m128 p = _mm_set1_ps(plus);
  for (std::int64_t w = 0; w < count; ++w, out += 32)
    for (int q = 0; q < 8; ++q) {
      const __m128 mask = _mm_load_ps(reinterpret_cast<const float*>(kSignMasks[(words[w] >> (4 * q)) & 15u]));
      const __m128 v = _mm_xor_ps(p, mask);
      _mm_storeu_ps(out + 4 * q, kAccumulate ? _mm_add_ps(_mm_loadu_ps(out + 4 * q), v) : v);
    }
#else
  for (std::int64_t w = 0; w < count; ++w, out += 32)
    for (int b = 0; b < 32; ++b) {
      const float v = ((words[w] >> b) & 1u) ? -plus : plus;
      out[b] = kAccumulate ? out[b] + v : v;
    }
#endif
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COMMTUNE_ONEBIT_SIMD 1

#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#define COMMTUNE_ONEBIT_WIDTH 8
#include "kernels/cpu/onebit_pack.inc"
#undef COMMTUNE_ONEBIT_WIDTH
}  // namespace avx2
#pragma GCC pop_options

// Lane j of group g gets bit 8g + j at the sign position.
template <bool kAccumulate>
__attribute__((target("avx2"))) void unpack_avx2(const std::uint32_t* words, std::int64_t count, float plus,
                                                 float* out) {
  const __m256 p = _mm256_set1_ps(plus);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  __m256i shift[4];
  for (int g = 0; g < 4; ++g)
    shift[g] = _mm256_setr_epi32(31 - 8 * g, 30 - 8 * g, 29 - 8 * g, 28 - 8 * g, 27 - 8 * g, 26 - 8 * g, 25 - 8 * g,
                                 24 - 8 * g);
  for (std::int64_t w = 0; w < count; ++w, out += 32) {
    const __m256i word = _mm256_set1_epi32(static_cast<int>(words[w]));
    for (int g = 0; g < 4; ++g) {
      const __m256 flip = _mm256_castsi256_ps(_mm256_and_si256(_mm256_sllv_epi32(word, shift[g]), sign));
      const __m256 v = _mm256_xor_ps(p, flip);
      _mm256_storeu_ps(out + 8 * g, kAccumulate ? _mm256_add_ps(_mm256_loadu_ps(out + 8 * g), v) : v);
    }
  }
}

#endif

using Pack = void (*)(const float*, std::int64_t, std::uint32_t*, float*);
using Unpack = void (*)(const std::uint32_t*, std::int64_t, float, float*);

struct Kernels {
  Pack pack;
  Unpack unpack, unpack_add;
};

Kernels kernels_of(cpu::SimdBuild build) {
#if defined(COMMTUNE_ONEBIT_SIMD)
  // 512-bit registers gain nothing here: unpacking runs as fast, and packing
  // streams from memory 1.7x slower with them (Zen 5, 16M elements).
  if (build != cpu::SimdBuild::portable) return {avx2::pack, unpack_avx2<false>, unpack_avx2<true>};
#endif
  (void)build;
  return {pack_portable, unpack_portable<false>, unpack_portable<true>};
}

const Kernels& fastest() {
  static const Kernels kernels = kernels_of(cpu::simd_builds().back());
  return kernels;
}

float pack_with(Pack pack, const float* x, std::int64_t n, bool scaled, std::uint32_t* words) {
  double abs_sum = 0;
  auto fold = [&abs_sum](float* lanes) {
    for (int j = 0; j < 16; ++j) abs_sum += (lanes[j] + lanes[j + 16]) + (lanes[j + 32] + lanes[j + 48]);
    std::memset(lanes, 0, kLanes * sizeof(float));
  };
  float lanes[kLanes] = {};
  const std::int64_t chunks = n / kLanes;
  for (std::int64_t first = 0; first < chunks; first += kBlockChunks) {
    const std::int64_t count = std::min(kBlockChunks, chunks - first);
    pack(x + kLanes * first, count, words + 2 * first, lanes);
    if (count == kBlockChunks) fold(lanes);
  }
  if (const std::int64_t rest = n - kLanes * chunks; rest > 0) {
    float tail[kLanes] = {};  // zeros add nothing and have no sign bit
    std::uint32_t tail_words[2];
    std::memcpy(tail, x + kLanes * chunks, static_cast<std::size_t>(rest) * 4);
    pack(tail, 1, tail_words, lanes);
    std::memcpy(words + 2 * chunks, tail_words, static_cast<std::size_t>((rest + 31) / 32) * 4);
  }
  fold(lanes);
  return scaled && n > 0 ? static_cast<float>(abs_sum / static_cast<double>(n)) : 1.0f;
}

void unpack_with(Unpack unpack, bool accumulate, const std::uint32_t* words, std::int64_t n, float scale, float weight,
                 float* out) {
  const float plus = scale * weight;
  const std::int64_t full = n / 32;
  unpack(words, full, plus, out);
  for (std::int64_t i = 32 * full; i < n; ++i) {
    const float v = ((words[full] >> (i % 32)) & 1u) ? -plus : plus;
    out[i] = accumulate ? out[i] + v : v;
  }
}

}  // namespace

float onebit_pack(const float* x, std::int64_t n, bool scaled, std::uint32_t* words) {
  return pack_with(fastest().pack, x, n, scaled, words);
}

void onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  unpack_with(fastest().unpack_add, true, words, n, scale, weight, out);
}

void onebit_unpack(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  unpack_with(fastest().unpack, false, words, n, scale, weight, out);
}

std::int64_t onebit_scale_scratch(std::int64_t n) { return 16 * ((n + kLanes * kBlockChunks - 1) / (kLanes * kBlockChunks)); }

// The order of pack_with, element by element: lane j of a block sums the
// block's elements j, j + 64, ... in float; each block folds its lanes to 16
// floats, added into a double in block and lane order. `partial` holds the
// folded floats (as the CUDA twin's first pass leaves them).
void cpu::onebit_scale(const float* x, std::int64_t n, bool scaled, float* partial, float* scale) {
  constexpr std::int64_t kBlock = kLanes * kBlockChunks;
  double abs_sum = 0;
  for (std::int64_t first = 0, b = 0; first < n; first += kBlock, ++b) {
    float lanes[kLanes] = {};
    const std::int64_t last = std::min(first + kBlock, n);
    for (std::int64_t i = first; i < last; ++i) lanes[(i - first) % kLanes] += std::fabs(x[i]);
    for (int j = 0; j < 16; ++j) {
      partial[16 * b + j] = (lanes[j] + lanes[j + 16]) + (lanes[j + 32] + lanes[j + 48]);
      abs_sum += partial[16 * b + j];
    }
  }
  *scale = scaled && n > 0 ? static_cast<float>(abs_sum / static_cast<double>(n)) : 1.0f;
}

float cpu::onebit_pack(SimdBuild build, const float* x, std::int64_t n, bool scaled, std::uint32_t* words) {
  return pack_with(kernels_of(build).pack, x, n, scaled, words);
}

void cpu::onebit_unpack(SimdBuild build, bool accumulate, const std::uint32_t* words, std::int64_t n, float scale,
                        float weight, float* out) {
  const Kernels k = kernels_of(build);
  unpack_with(accumulate ? k.unpack_add : k.unpack, accumulate, words, n, scale, weight, out);
}

void cpu::onebit_signs(const float* x, std::int64_t n, std::uint32_t* words) {
  kernels::onebit_pack(x, n, false, words);
}

void cpu::onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  kernels::onebit_unpack_add(words, n, scale, weight, out);
}

}  // namespace commtune::kernels

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/compress.h"
#include "kernels/cpu/dispatch.h"

namespace commtune::kernels {

Xorshift128p Xorshift128p::seeded(std::uint64_t seed) {
  auto splitmix = [&seed] {
    std::uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  Xorshift128p g;
  g.s0 = splitmix();
  g.s1 = splitmix();
  return g;
}

namespace {

// The 32 values a onebit word decodes to (+plus, or -plus where its bit is
// set), added to out or written over it.
template <bool kAccumulate>
inline void put_signed_block(std::uint32_t word, float plus, float* out) {
#if defined(__SSE2__)
  // Four bits at a time become four sign masks, XORed onto +plus.
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
  for (int q = 0; q < 8; ++q) {
    const __m128 mask = _mm_load_ps(reinterpret_cast<const float*>(kSignMasks[(word >> (4 * q)) & 15u]));
    const __m128 v = _mm_xor_ps(p, mask);
    _mm_storeu_ps(out + 4 * q, kAccumulate ? _mm_add_ps(_mm_loadu_ps(out + 4 * q), v) : v);
  }
#else
  for (int b = 0; b < 32; ++b) {
    const float v = ((word >> b) & 1u) ? -plus : plus;
    out[b] = kAccumulate ? out[b] + v : v;
  }
#endif
}

// The sign bits of 32 floats, and the sum of their magnitudes (in float,
// four lanes, then added up in lane order).
inline std::uint32_t sign_block(const float* x, double& abs_sum) {
#if defined(__SSE2__)
  const __m128 magnitude = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 sum = _mm_setzero_ps();
  std::uint32_t word = 0;
  for (int q = 0; q < 8; ++q) {
    const __m128 v = _mm_loadu_ps(x + 4 * q);
    word |= static_cast<std::uint32_t>(_mm_movemask_ps(v)) << (4 * q);
    sum = _mm_add_ps(sum, _mm_and_ps(v, magnitude));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, sum);
  abs_sum += static_cast<double>(lanes[0]) + lanes[1] + lanes[2] + lanes[3];
  return word;
#else
  std::uint32_t word = 0;
  for (int b = 0; b < 32; ++b) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, x + b, 4);
    word |= (bits >> 31) << b;
    abs_sum += std::fabs(x[b]);
  }
  return word;
#endif
}

}  // namespace

float onebit_pack(const float* x, std::int64_t n, bool scaled, std::uint32_t* words) {
  double abs_sum = 0;
  const std::int64_t full = n / 32;
  for (std::int64_t w = 0; w < full; ++w) words[w] = sign_block(x + 32 * w, abs_sum);
  if (n % 32) {
    float tail[32] = {};
    std::memcpy(tail, x + 32 * full, static_cast<std::size_t>(n % 32) * 4);
    words[full] = sign_block(tail, abs_sum);
  }
  return scaled && n > 0 ? static_cast<float>(abs_sum / static_cast<double>(n)) : 1.0f;
}

namespace {
template <bool kAccumulate>
void onebit_unpack_into(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  const float plus = scale * weight;
  const std::int64_t full = n / 32;
  for (std::int64_t w = 0; w < full; ++w) put_signed_block<kAccumulate>(words[w], plus, out + 32 * w);
  for (std::int64_t i = 32 * full; i < n; ++i) {
    const float v = ((words[full] >> (i % 32)) & 1u) ? -plus : plus;
    out[i] = kAccumulate ? out[i] + v : v;
  }
}
}  // namespace

void onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  onebit_unpack_into<true>(words, n, scale, weight, out);
}

void onebit_unpack(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  onebit_unpack_into<false>(words, n, scale, weight, out);
}

namespace {

// The k largest |x| among `candidates` (ascending indices; ties: lower index
// first), written in ascending index order. The k-th largest magnitude comes
// from nth_element on a copy of the magnitudes; one pass over the candidates,
// already in index order, then keeps the larger ones and the first ties:
// no sort, no comparisons through the indices.
void select_largest(const float* x, const std::vector<std::uint32_t>& candidates, std::int64_t k,
                    std::uint32_t* indices, float* values) {
  std::vector<float> magnitudes(candidates.size());
  for (std::size_t j = 0; j < candidates.size(); ++j) magnitudes[j] = std::fabs(x[candidates[j]]);
  std::vector<float> order = magnitudes;
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), std::greater<float>());
  const float kth = order[static_cast<std::size_t>(k - 1)];
  std::int64_t above = 0;
  for (const float m : magnitudes) above += m > kth;
  std::int64_t ties = k - above, kept = 0;
  for (std::size_t j = 0; j < candidates.size() && kept < k; ++j) {
    const float m = magnitudes[j];
    if (m > kth || (m == kth && ties-- > 0)) {
      indices[kept] = candidates[j];
      values[kept] = x[candidates[j]];
      ++kept;
    }
  }
}

}  // namespace

void topk_select(const float* x, std::int64_t n, std::int64_t k, std::uint32_t* indices, float* values) {
  // For small k: a threshold from an evenly spaced sample, set low enough that
  // more than k elements pass it; one streaming pass keeps those, and the
  // exact selection runs on them alone. Every element at or above the k-th
  // largest passes, so the result is the exact top k.
  constexpr std::int64_t kSample = 1 << 12;
  if (n >= 8 * kSample && k * 16 <= n) {
    std::vector<float> sample(kSample);
    const std::int64_t stride = n / kSample;
    for (std::int64_t j = 0; j < kSample; ++j) sample[j] = std::fabs(x[j * stride]);
    // Aim for about 2x k candidates (the sample's quantile for 2k/n).
    const auto rank = std::min<std::int64_t>(kSample - 1, (2 * k * kSample) / n);
    std::nth_element(sample.begin(), sample.begin() + rank, sample.end(), std::greater<float>());
    const float threshold = sample[rank];
    // About 2% pass: test 16 at a time and look closer only where one does.
    const std::int64_t capacity = 4 * k;
    std::vector<std::uint32_t> candidates(static_cast<std::size_t>(capacity + 16));
    std::int64_t count = 0, i = 0;
#if defined(__SSE2__)
    const __m128 magnitude = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    const __m128 t = _mm_set1_ps(threshold);
    for (; i + 16 <= n && count < capacity; i += 16) {
      unsigned mask = 0;
      for (int q = 0; q < 4; ++q) {
        const __m128 v = _mm_and_ps(_mm_loadu_ps(x + i + 4 * q), magnitude);
        mask |= static_cast<unsigned>(_mm_movemask_ps(_mm_cmpge_ps(v, t))) << (4 * q);
      }
      for (; mask; mask &= mask - 1)
        candidates[static_cast<std::size_t>(count++)] = static_cast<std::uint32_t>(i + __builtin_ctz(mask));
    }
#endif
    for (; i < n && count < capacity; ++i) {
      candidates[static_cast<std::size_t>(count)] = static_cast<std::uint32_t>(i);
      count += std::fabs(x[i]) >= threshold;
    }
    if (count >= k && count < capacity) {  // a full buffer: the sample misled; select among all
      candidates.resize(static_cast<std::size_t>(count));
      select_largest(x, candidates, k, indices, values);
      return;
    }
  }
  std::vector<std::uint32_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0u);
  select_largest(x, all, k, indices, values);
}

void randomk_select(const float* x, std::int64_t n, std::int64_t k, float scale, Xorshift128p& rng,
                    std::uint32_t* indices, float* values) {
  const auto range = static_cast<std::uint64_t>(n);
  for (std::int64_t j = 0; j < k; ++j) {
    // Multiply-shift maps 64 random bits onto [0, n) without a division.
    __extension__ using wide = unsigned __int128;
    const auto i = static_cast<std::uint32_t>((static_cast<wide>(rng.next()) * range) >> 64);
    indices[j] = i;
    values[j] = x[i] * scale;
  }
}

void scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out) {
  for (std::int64_t j = 0; j < k; ++j) out[indices[j]] += values[j] * weight;
}

void cpu::onebit_signs(const float* x, std::int64_t n, std::uint32_t* words) { onebit_pack(x, n, false, words); }

void cpu::onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  kernels::onebit_unpack_add(words, n, scale, weight, out);
}

void cpu::scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out) {
  kernels::scatter_add(indices, values, k, weight, out);
}

void cpu::gather_scaled(const float* x, const std::uint32_t* indices, std::int64_t k, float scale, float* values) {
  for (std::int64_t j = 0; j < k; ++j) values[j] = x[indices[j]] * scale;
}

}  // namespace commtune::kernels

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
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

// The k-th largest (k >= 1) of `keys`: a radix select on the bits, 11, 11
// and 10 at a time, each pass over the keys that share the digits found so
// far. For the magnitudes' float bits (no sign bit) integer order is float
// order; NaN's bits rank above infinity's.
std::uint32_t kth_largest(std::vector<std::uint32_t> keys, std::int64_t k) {
  std::uint32_t prefix = 0;
  for (const auto& [shift, width] : {std::pair{21, 11}, std::pair{10, 11}, std::pair{0, 10}}) {
    const std::uint32_t digits = (1u << width) - 1;
    std::array<std::uint32_t, 2048> count{};
    for (const auto key : keys) ++count[(key >> shift) & digits];
    std::uint32_t digit = digits;
    for (; count[digit] < k; --digit) k -= count[digit];
    prefix |= digit << shift;
    keys.erase(
        std::remove_if(keys.begin(), keys.end(), [&](std::uint32_t key) { return ((key >> shift) & digits) != digit; }),
        keys.end());
  }
  return prefix;
}

// The k largest |x| among `candidates` (ascending indices; ties: lower index
// first), written in ascending index order. The k-th largest magnitude comes
// from a radix select on the magnitudes' bits; one pass over the candidates,
// already in index order, then keeps the larger ones and the first ties:
// no sort, no comparisons through the indices.
void select_largest(const float* x, const std::vector<std::uint32_t>& candidates, std::int64_t k,
                    std::uint32_t* indices, float* values) {
  std::vector<std::uint32_t> magnitudes(candidates.size());
  for (std::size_t j = 0; j < candidates.size(); ++j) {
    std::memcpy(&magnitudes[j], x + candidates[j], 4);
    magnitudes[j] &= 0x7fffffffu;
  }
  const std::uint32_t kth = kth_largest(magnitudes, k);
  std::int64_t above = 0;
  for (const auto m : magnitudes) above += m > kth;
  std::int64_t ties = k - above, kept = 0;
  for (std::size_t j = 0; j < candidates.size() && kept < k; ++j) {
    const auto m = magnitudes[j];
    if (m > kth || (m == kth && ties-- > 0)) {
      indices[kept] = candidates[j];
      values[kept] = x[candidates[j]];
      ++kept;
    }
  }
}

}  // namespace

namespace {

// topk's streaming pass: appends to `candidates` the indices i from `first`
// on with |x[i]| >= threshold (16 at a time while i + 16 <= n), until
// `capacity` of them are found; there are 16 slots of room past capacity.
// Returns where it stopped and how many it found. Branch-free where the CPU
// allows (about 2% pass: a branch on each group mispredicts often).
struct ScanEnd {
  std::int64_t next, count;
};
using Scan = ScanEnd (*)(const float* x, std::int64_t n, float threshold, std::int64_t capacity,
                         std::uint32_t* candidates);

ScanEnd scan_portable(const float* x, std::int64_t n, float threshold, std::int64_t capacity,
                      std::uint32_t* candidates) {
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
    for (; mask; mask &= mask - 1) candidates[count++] = static_cast<std::uint32_t>(i + __builtin_ctz(mask));
  }
#endif
  (void)threshold;
  return {i, count};
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COMMTUNE_TOPK_SIMD 1

// For each 8-bit mask, the positions of its set bits, in order.
struct alignas(8) BitPositions : std::array<std::uint8_t, 8> {};
constexpr std::array<BitPositions, 256> make_bit_positions() {
  std::array<BitPositions, 256> table{};
  for (int mask = 0; mask < 256; ++mask)
    for (int bit = 0, slot = 0; bit < 8; ++bit)
      if (mask & (1 << bit))
        table[static_cast<std::size_t>(mask)][static_cast<std::size_t>(slot++)] = static_cast<std::uint8_t>(bit);
  return table;
}
constexpr std::array<BitPositions, 256> kBitPositions = make_bit_positions();

__attribute__((target("avx2,popcnt"))) ScanEnd scan_avx2(const float* x, std::int64_t n, float threshold,
                                                         std::int64_t capacity, std::uint32_t* candidates) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), t = _mm256_set1_ps(threshold);
  std::int64_t count = 0, i = 0;
  for (; i + 8 <= n && count < capacity; i += 8) {
    const __m256 v = _mm256_and_ps(_mm256_loadu_ps(x + i), magnitude);
    const auto mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v, t, _CMP_GE_OQ)));
    const __m256i slots =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(kBitPositions[mask].data())));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(candidates + count),
                        _mm256_add_epi32(slots, _mm256_set1_epi32(static_cast<int>(i))));
    count += __builtin_popcount(mask);
  }
  return {i, count};
}

__attribute__((target("avx512f,popcnt"))) ScanEnd scan_avx512(const float* x, std::int64_t n, float threshold,
                                                              std::int64_t capacity, std::uint32_t* candidates) {
  const __m512 t = _mm512_set1_ps(threshold);
  const __m512i step = _mm512_set1_epi32(16);
  __m512i index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::int64_t count = 0, i = 0;
  for (; i + 16 <= n && count < capacity; i += 16, index = _mm512_add_epi32(index, step)) {
    const __mmask16 pass = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), t, _CMP_GE_OQ);
    // The register form of compress, then a full store: compress to memory is slow on Zen 5.
    _mm512_storeu_si512(candidates + count, _mm512_maskz_compress_epi32(pass, index));
    count += __builtin_popcount(pass);
  }
  return {i, count};
}
#endif

Scan scan_of(cpu::SimdBuild build) {
#if defined(COMMTUNE_TOPK_SIMD)
  if (build == cpu::SimdBuild::avx512) return scan_avx512;
  if (build == cpu::SimdBuild::avx2) return scan_avx2;
#endif
  (void)build;
  return scan_portable;
}

void topk_with(Scan scan, const float* x, std::int64_t n, std::int64_t k, std::uint32_t* indices, float* values) {
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
    const std::int64_t capacity = 4 * k;
    std::vector<std::uint32_t> candidates(static_cast<std::size_t>(capacity + 16));
    auto [i, count] = scan(x, n, threshold, capacity, candidates.data());
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

}  // namespace

void topk_select(const float* x, std::int64_t n, std::int64_t k, std::uint32_t* indices, float* values) {
  static const Scan fastest = scan_of(cpu::simd_builds().back());
  topk_with(fastest, x, n, k, indices, values);
}

void cpu::topk_select(SimdBuild build, const float* x, std::int64_t n, std::int64_t k, std::uint32_t* indices,
                      float* values) {
  topk_with(scan_of(build), x, n, k, indices, values);
}

void randomk_indices(std::int64_t n, std::int64_t k, Xorshift128p& rng, std::uint32_t* indices) {
  const auto range = static_cast<std::uint64_t>(n);
  for (std::int64_t j = 0; j < k; ++j) indices[j] = static_cast<std::uint32_t>(rng.next() % range);
}

void randomk_select(const float* x, std::int64_t n, std::int64_t k, float scale, Xorshift128p& rng,
                    std::uint32_t* indices, float* values) {
  randomk_indices(n, k, rng, indices);
  for (std::int64_t j = 0; j < k; ++j) values[j] = x[indices[j]] * scale;
}

void scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out) {
  for (std::int64_t j = 0; j < k; ++j) out[indices[j]] += values[j] * weight;
}

void cpu::scatter_add(const std::uint32_t* indices, const float* values, std::int64_t k, float weight, float* out) {
  kernels::scatter_add(indices, values, k, weight, out);
}

COMMTUNE_CPU_CLONES void cpu::nesterov_fold(float* __restrict x, float* __restrict momentum, std::int64_t n, float mu) {
  for (std::int64_t i = 0; i < n; ++i) {
    momentum[i] = mu * momentum[i] + x[i];
    x[i] += mu * momentum[i];
  }
}

void cpu::gather_scaled(const float* x, const std::uint32_t* indices, std::int64_t k, float scale, float* values) {
  for (std::int64_t j = 0; j < k; ++j) values[j] = x[indices[j]] * scale;
}

}  // namespace commtune::kernels

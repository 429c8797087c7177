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

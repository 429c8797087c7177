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
#include "kernels/dithering_draw.h"

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

// out += the 32 values a onebit word decodes to (+plus, or -plus where its bit is set).
inline void add_signed_block(std::uint32_t word, float plus, float* out) {
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
    _mm_storeu_ps(out + 4 * q, _mm_add_ps(_mm_loadu_ps(out + 4 * q), _mm_xor_ps(p, mask)));
  }
#else
  for (int b = 0; b < 32; ++b) out[b] += ((word >> b) & 1u) ? -plus : plus;
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

void onebit_unpack_add(const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out) {
  const float plus = scale * weight;
  const std::int64_t full = n / 32;
  for (std::int64_t w = 0; w < full; ++w) add_signed_block(words[w], plus, out + 32 * w);
  for (std::int64_t i = 32 * full; i < n; ++i) out[i] += ((words[full] >> (i % 32)) & 1u) ? -plus : plus;
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

namespace {

// Codes are written least significant bit first. gamma(v), v >= 1, with
// w = floor(log2 v): w zero bits, a 1, then the w bits of v below its top
// bit, lowest first. Elias gamma's length (2w + 1); this order lets a 64-bit
// accumulator emit a code in one shift and a reader find w with one ctz.
inline int gamma_width(std::uint64_t v) { return 63 - __builtin_clzll(v); }
inline std::uint64_t gamma_code(std::uint64_t v, int width) { return (((v ^ (1ull << width)) << 1) | 1u) << width; }

// Every put stores the accumulator's 8 bytes and advances by the whole
// bytes: no branch on how full it is. The output needs 8 bytes of slack
// (dithering_max_bytes counts them).
class BitWriter {
 public:
  explicit BitWriter(std::uint8_t* out) : out_(out) {}
  void put(std::uint64_t value, int width) {  // width <= 56
    acc_ |= value << used_;
    used_ += width;
    std::memcpy(out_ + bytes_, &acc_, 8);
    const int whole = used_ >> 3;
    bytes_ += static_cast<std::size_t>(whole);
    acc_ = whole ? acc_ >> (8 * whole) : acc_;
    used_ &= 7;
  }
  void gamma(std::uint64_t v) {
    const int width = gamma_width(v);
    if (2 * width + 1 <= 56) return put(gamma_code(v, width), 2 * width + 1);
    put(0, width);
    put(((v ^ (1ull << width)) << 1) | 1u, width + 1);
  }
  std::size_t finish() const { return bytes_ + (used_ > 0 ? 1 : 0); }

 private:
  std::uint8_t* out_;
  std::uint64_t acc_ = 0;
  int used_ = 0;
  std::size_t bytes_ = 0;
};

class BitReader {
 public:
  BitReader(const std::uint8_t* in, std::size_t bytes) : in_(in), bytes_(bytes) {}
  // At least 57 bits in the accumulator, unless the stream ends first.
  void refill() {
    if (next_ + 8 <= bytes_) {  // one unaligned load
      std::uint64_t word;
      std::memcpy(&word, in_ + next_, 8);
      acc_ |= word << have_;
      const int whole = (63 - have_) >> 3;
      next_ += static_cast<std::size_t>(whole);
      have_ += 8 * whole;
      acc_ &= have_ == 64 ? ~0ull : (1ull << have_) - 1;
      return;
    }
    while (have_ <= 56 && next_ < bytes_) {
      acc_ |= static_cast<std::uint64_t>(in_[next_++]) << have_;
      have_ += 8;
    }
  }
  std::uint64_t peek() const { return acc_; }
  int available() const { return have_; }
  void skip(int width) {
    acc_ = width == 64 ? 0 : acc_ >> width;
    have_ -= width;
  }
  unsigned bit() { return static_cast<unsigned>(take(1)); }
  std::uint64_t gamma() {
    refill();
    if (acc_ == 0) throw std::runtime_error("dithering payload holds an invalid code or ends early");
    const int width = __builtin_ctzll(acc_);
    if (width > 32) throw std::runtime_error("dithering payload holds an invalid code");
    take(width + 1);  // the zeros and the marker
    return (1ull << width) | take(width);
  }

 private:
  std::uint64_t take(int width) {
    refill();
    if (width > have_) throw std::runtime_error("dithering payload ends early: damaged or from another format");
    const std::uint64_t value = width == 64 ? acc_ : acc_ & ((1ull << width) - 1);
    skip(width);
    return value;
  }

  const std::uint8_t* in_;
  std::size_t bytes_;
  std::size_t next_ = 0;
  std::uint64_t acc_ = 0;
  int have_ = 0;
};

// The level value q/s (linear) or 2^(q-s) (natural, q >= 1) of level q.
float level_value(std::int64_t q, const DitheringOptions& o) {
  if (q == 0) return 0.0f;
  return o.natural ? std::ldexp(1.0f, static_cast<int>(q - o.levels))
                   : static_cast<float>(q) / static_cast<float>(o.levels);
}

// Stochastic rounding of a in [0, 1] to a natural level (0, 2^(1-s), .., 1): unbiased.
std::uint8_t quantise_natural(float a, float u, const DitheringOptions& o) {
  if (a <= 0.0f) return 0;
  int exponent = 0;
  std::frexp(a, &exponent);  // a = m * 2^exponent, m in [0.5, 1)
  const auto q = std::clamp<std::int64_t>(exponent - 1 + o.levels, 0, o.levels);
  if (q == o.levels) return static_cast<std::uint8_t>(q);
  const float low = level_value(q, o), high = level_value(q + 1, o);
  return static_cast<std::uint8_t>(q + (u < (a - low) / (high - low) ? 1 : 0));
}

constexpr std::int64_t kBlock = 1024;

// Bit j set when q[j] != 0, for 64 bytes (the block is padded to whole 64s).
inline std::uint64_t nonzero_mask(const std::uint8_t* q) {
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  std::uint64_t zeros = 0;
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(q + 16 * k));
    zeros |= static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero))))
             << (16 * k);
  }
  return ~zeros;
#else
  std::uint64_t kept = 0;
  for (int j = 0; j < 64; ++j) kept |= static_cast<std::uint64_t>(q[j] != 0) << j;
  return kept;
#endif
}

}  // namespace

// Levels of x[first, first + count) into q; linear levels in a loop the
// compiler vectorises.
COMMTUNE_CPU_CLONES void cpu::dithering_levels(const float* x, std::int64_t first, std::int64_t count, float inverse,
                                               const DitheringOptions& o, std::uint64_t key, std::uint8_t* q) {
  const auto key_low = static_cast<std::uint32_t>(key), key_high = static_cast<std::uint32_t>(key >> 32);
  if (o.natural) {
    for (std::int64_t j = 0; j < count; ++j) {
      const auto i = static_cast<std::uint32_t>(first + j);
      q[j] =
          quantise_natural(std::min(std::fabs(x[first + j]) * inverse, 1.0f), dithering_draw(i, key_low, key_high), o);
    }
    return;
  }
  // Selects, not branches, throughout (and -fno-trapping-math for this
  // file): the loop vectorises.
  const float levels = static_cast<float>(o.levels);
  const auto top = static_cast<std::int32_t>(o.levels);
  for (std::int64_t j = 0; j < count; ++j) {
    const auto i = static_cast<std::uint32_t>(first + j);
    float a = std::fabs(x[first + j]) * inverse;
    a = a < 1.0f ? a : 1.0f;
    const float scaled = a * levels;
    std::int32_t low = static_cast<std::int32_t>(scaled);
    low = low < top ? low : top;
    std::int32_t up = dithering_draw(i, key_low, key_high) < scaled - static_cast<float>(low) ? 1 : 0;
    up = low < top ? up : 0;
    q[j] = static_cast<std::uint8_t>(low + up);
  }
}

std::size_t dithering_max_bytes(std::int64_t n, const DitheringOptions& o) {
  // Per element at most: gap 1 (1 bit), the sign, gamma(level) <= 2 floor(log2 s) + 1 bits;
  // then 8 bytes the writer may store past the end of the stream.
  const int level_bits = 2 * gamma_width(static_cast<std::uint64_t>(std::max<std::int64_t>(o.levels, 1))) + 1;
  return 8 + (static_cast<std::size_t>(n) * static_cast<std::size_t>(2 + level_bits) + 7) / 8 + 8;
}

std::size_t dithering_encode(const float* x, std::int64_t n, const DitheringOptions& o, Xorshift128p& rng,
                             std::uint8_t* out) {
  float norm_f = 0;
  if (o.l2_norm) {
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    norm_f = static_cast<float>(std::sqrt(sum));
  } else {
    // The largest |x| through its bits: for non-negative floats integer order
    // is float order, and an integer max reduction vectorises.
    std::int32_t largest = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      std::int32_t bits;
      std::memcpy(&bits, x + i, 4);
      bits &= 0x7fffffff;
      largest = bits > largest ? bits : largest;
    }
    std::memcpy(&norm_f, &largest, 4);
  }
  std::memcpy(out, &norm_f, 4);
  BitWriter bits(out + 8);
  std::uint32_t nonzeros = 0;
  if (norm_f > 0) {
    const float inverse = 1.0f / norm_f;
    const std::uint64_t key = rng.next();     // one draw per compression: the generator state stays checkpointable
    alignas(16) std::uint8_t q[kBlock] = {};  // whole 64s: a short last block reads zeros past its end
    std::int64_t previous = -1;
    for (std::int64_t first = 0; first < n; first += kBlock) {
      const std::int64_t count = std::min(kBlock, n - first);
      cpu::dithering_levels(x, first, count, inverse, o, key, q);
      // Only the kept elements cost anything below: find them 64 at a time.
      for (std::int64_t base = 0; base < count; base += 64) {
        const std::uint64_t kept_all = nonzero_mask(q + base);
        const std::int64_t span = std::min<std::int64_t>(64, count - base);
        std::uint64_t kept = span == 64 ? kept_all : kept_all & ((1ull << span) - 1);
        for (; kept; kept &= kept - 1) {
          const std::int64_t i = first + base + __builtin_ctzll(kept);
          const auto level = static_cast<std::uint64_t>(q[i - first]);
          const auto gap = static_cast<std::uint64_t>(i - previous);
          const std::uint64_t sign = std::signbit(x[i]);
          const int gap_width = gamma_width(gap), level_width = gamma_width(level);
          const int length = 2 * gap_width + 2 + 2 * level_width + 1;
          if (length <= 56) {
            bits.put(gamma_code(gap, gap_width) | (sign << (2 * gap_width + 1)) |
                         (gamma_code(level, level_width) << (2 * gap_width + 2)),
                     length);
          } else {
            bits.gamma(gap);
            bits.put(sign, 1);
            bits.gamma(level);
          }
          previous = i;
          ++nonzeros;
        }
      }
    }
  }
  std::memcpy(out + 4, &nonzeros, 4);
  return 8 + bits.finish();
}

void dithering_decode_add(const std::uint8_t* in, std::size_t bytes, std::int64_t n, const DitheringOptions& o,
                          float weight, float* out) {
  if (bytes < 8) throw std::runtime_error("dithering payload shorter than its header");
  float norm = 0;
  std::uint32_t nonzeros = 0;
  std::memcpy(&norm, in, 4);
  std::memcpy(&nonzeros, in + 4, 4);
  BitReader bits(in + 8, bytes - 8);
  std::vector<float> values(static_cast<std::size_t>(o.levels) + 1);  // per level, already scaled
  for (std::int64_t q = 0; q <= o.levels; ++q) values[static_cast<std::size_t>(q)] = level_value(q, o) * norm * weight;
  std::int64_t i = -1;
  for (std::uint32_t j = 0; j < nonzeros; ++j) {
    // Fast path: the whole code (gap, sign, level) is in the accumulator.
    bits.refill();
    const std::uint64_t acc = bits.peek();
    const int gap_width = acc ? __builtin_ctzll(acc) : 64;
    std::uint64_t gap = 0, level = 0;
    bool negative = false;
    if (gap_width <= 12) {
      const std::uint64_t rest = acc >> (2 * gap_width + 2);
      const int level_width = rest ? __builtin_ctzll(rest) : 64;
      const int length = 2 * gap_width + 2 + 2 * level_width + 1;
      if (level_width <= 5 && length <= bits.available()) {
        gap = (1ull << gap_width) | ((acc >> (gap_width + 1)) & ((1ull << gap_width) - 1));
        negative = (acc >> (2 * gap_width + 1)) & 1;
        level = (1ull << level_width) | ((rest >> (level_width + 1)) & ((1ull << level_width) - 1));
        bits.skip(length);
      }
    }
    if (!gap) {  // long codes, or a damaged stream: the checked path
      gap = bits.gamma();
      negative = bits.bit();
      level = bits.gamma();
    }
    i += static_cast<std::int64_t>(gap);
    if (i >= n || level > static_cast<std::uint64_t>(o.levels))
      throw std::runtime_error("dithering payload points outside its tensor");
    const float v = values[static_cast<std::size_t>(level)];
    out[i] += negative ? -v : v;
  }
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

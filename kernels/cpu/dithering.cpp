// Dithering on the CPU: the levels (stochastic rounding, vectorised) and the
// stream that codes them (docs/compressors.md, "Wire formats"). The coder is
// compiled three times from dithering_codec.inc: portable, with AVX2 + BMI2
// (bit deposit/extract, 8-lane expansion) and with AVX-512 (mask registers,
// 16 lanes); cpu::bit_coder_build chooses once.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/compress.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/dithering_draw.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COMMTUNE_DITHERING_SIMD 1
#endif

namespace commtune::kernels {

namespace {

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

// The stream codes rank r in [1, s] of each nonzero level, counted from the
// end where levels crowd: from the bottom for linear levels (most are 1),
// from the top for natural ones (magnitudes near the norm's).
std::int64_t level_of_rank(std::int64_t r, const DitheringOptions& o) { return o.natural ? o.levels + 1 - r : r; }

// Header: f32 norm | u32 nonzero count | u32 bytes of the position stream |
// u8 Rice parameter k | 3 zero bytes.
constexpr std::size_t kHeaderBytes = 16;

struct Header {
  float norm = 0;
  std::uint32_t nonzeros = 0;
  std::uint32_t position_bytes = 0;
  std::uint8_t rice_k = 0;

  void write(std::uint8_t* out) const {
    std::memset(out, 0, kHeaderBytes);
    std::memcpy(out, &norm, 4);
    std::memcpy(out + 4, &nonzeros, 4);
    std::memcpy(out + 8, &position_bytes, 4);
    out[12] = rice_k;
  }
  static Header read(const std::uint8_t* in, std::size_t bytes) {
    if (bytes < kHeaderBytes) throw std::runtime_error("dithering payload shorter than its header");
    Header h;
    std::memcpy(&h.norm, in, 4);
    std::memcpy(&h.nonzeros, in + 4, 4);
    std::memcpy(&h.position_bytes, in + 8, 4);
    h.rice_k = in[12];
    if (h.rice_k > 31 || h.position_bytes > bytes - kHeaderBytes)
      throw std::runtime_error("dithering payload's header is damaged or from another format");
    return h;
  }
};

// Golomb's choice for geometric gaps of mean n / nonzeros, rounded down to a
// power of two: k = floor(log2(ln 2 * mean gap)), 0 (a bitmap) when dense.
std::uint8_t rice_parameter(std::int64_t n, std::int64_t nonzeros) {
  const double m = 0.6931471805599453 * static_cast<double>(n) / static_cast<double>(nonzeros);
  return m < 2.0 ? 0 : static_cast<std::uint8_t>(std::min(30.0, std::floor(std::log2(m))));
}

// The rank planes the encoder codes whether or not a chunk has elements
// left in them: an empty plane is a few operations and no bits, while
// stopping at the first empty one is a branch on the data that mispredicts
// about every other chunk at s = 4 on Gaussian gradients (AVX-512 encode
// 0.25 -> 0.22 ns per element). Past these, a chunk's planes stop as the
// format says, so many levels cost nothing extra.
constexpr int kPlanesAlwaysWalked = 3;

// Per 64-element chunk, the mask of its nonzero levels: what the encoder's
// pass over the tensor leaves for the positions. Reused by the calls on one
// thread: allocating and faulting in a tensor's worth per call costs more
// than coding it.
std::uint64_t* encoder_scratch(std::int64_t chunks) {
  thread_local std::vector<std::uint64_t> kept;
  if (kept.size() < static_cast<std::size_t>(chunks)) kept.resize(static_cast<std::size_t>(chunks));
  return kept.data();
}

// Room for the position stream: a bitmap (n bits) or Rice codes, at most
// n (1 + ln2 (1 + k)) / 2^k < 1.2 n bits with rice_parameter's k, and the 8
// bytes its writer may store past its end.
std::size_t position_capacity(std::int64_t n) { return (static_cast<std::size_t>(n) * 5 + 31) / 32 + 8; }

// Writes least significant bit first. Every put stores the accumulator's 8
// bytes and advances by the whole bytes: no branch on how full it is, and up
// to 8 bytes past the stream's end are written (dithering_max_bytes counts them).
class BitWriter {
 public:
  explicit BitWriter(std::uint8_t* out) : start_(out), out_(out) {}
  void put(std::uint64_t value, int width) {  // width <= 56, value < 2^width
    acc_ |= value << used_;
    used_ += static_cast<unsigned>(width);  // < 64
    std::memcpy(out_, &acc_, 8);
    out_ += used_ >> 3;
    acc_ >>= used_ & ~7u;
    used_ &= 7;
  }
  void put_wide(std::uint64_t value, int width) {  // width <= 64
    if (width <= 56) return put(value, width);
    put(value & 0xffffffffu, 32);
    put(value >> 32, width - 32);
  }
  void zeros(std::uint64_t count) {
    for (; count > 56; count -= 56) put(0, 56);
    put(0, static_cast<int>(count));
  }
  std::size_t finish() const { return static_cast<std::size_t>(out_ - start_) + (used_ > 0 ? 1 : 0); }

 private:
  std::uint8_t* start_;
  std::uint8_t* out_;
  std::uint64_t acc_ = 0;
  unsigned used_ = 0;
};

// Reads least significant bit first. The accumulator's bits above the
// count it holds are the stream's next bits (or zeros), never other data,
// so a refill ORs its load over them without masking (F. Giesen's
// branch-free refill).
class BitReader {
 public:
  BitReader(const std::uint8_t* in, std::size_t bytes) : in_(in), bytes_(bytes) {}
  // Whether the stream holds the next `bits` bits and 8 bytes past them for
  // every refill's load: then take<true> needs no check (a decoder asks
  // once per chunk, not once per take).
  bool holds(std::size_t bits) const { return next_ + bits / 8 + 16 <= bytes_; }
  template <bool kHeld = false>
  std::uint64_t take(int width) {  // width <= 56
    if (kHeld) {
      refill_whole_word();
    } else {
      refill();
      if (width > have_) throw std::runtime_error("dithering payload ends early: damaged or from another format");
    }
    const std::uint64_t value = acc_ & ((1ull << width) - 1);
    skip(width);
    return value;
  }
  template <bool kHeld = false>
  std::uint64_t take_wide(int width) {  // width <= 64
    if (width <= 56) return take<kHeld>(width);
    const std::uint64_t low = take<kHeld>(32);
    return low | take<kHeld>(width - 32) << 32;
  }
  // The zero bits before the next one bit (which it consumes); at most `limit`.
  std::uint64_t unary(std::uint64_t limit) {
    for (std::uint64_t zeros = 0;;) {
      refill();
      const int run = __builtin_ctzll(acc_ | (1ull << have_));
      if (run < have_) {
        skip(run + 1);
        return zeros + static_cast<std::uint64_t>(run);
      }
      if (have_ == 0 || (zeros += static_cast<std::uint64_t>(have_)) > limit)
        throw std::runtime_error("dithering payload holds an invalid code or ends early");
      skip(have_);
    }
  }

 private:
  // 56 or more bits in the accumulator (at most 63), unless the stream ends first.
  void refill() {
    if (next_ + 8 <= bytes_) return refill_whole_word();
    while (have_ <= 55 && next_ < bytes_) {
      acc_ |= static_cast<std::uint64_t>(in_[next_++]) << have_;
      have_ += 8;
    }
  }
  // One unaligned load; next_ * 8 stays the stream position plus have_.
  void refill_whole_word() {
    std::uint64_t word;
    std::memcpy(&word, in_ + next_, 8);
    acc_ |= word << have_;
    next_ += static_cast<std::size_t>((63 - have_) >> 3);
    have_ |= 56;
  }
  void skip(int width) {  // width <= have_ <= 63
    acc_ >>= width;
    have_ -= width;
  }

  const std::uint8_t* in_;
  std::size_t bytes_;
  std::size_t next_ = 0;
  std::uint64_t acc_ = 0;
  int have_ = 0;
};

// Byte b as eight int32 lanes: lane j holds bit j of b (the AVX2 decoder's
// bits-to-lanes step, one load).
struct alignas(32) ByteLanes : std::array<std::int32_t, 8> {};
constexpr std::array<ByteLanes, 256> make_byte_lanes() {
  std::array<ByteLanes, 256> table{};
  for (int b = 0; b < 256; ++b)
    for (int j = 0; j < 8; ++j) table[static_cast<std::size_t>(b)][static_cast<std::size_t>(j)] = (b >> j) & 1;
  return table;
}
constexpr std::array<ByteLanes, 256> kByteLanes = make_byte_lanes();

namespace portable {
#define COMMTUNE_CODEC_LEVEL 0
#include "kernels/cpu/dithering_codec.inc"
#undef COMMTUNE_CODEC_LEVEL
}  // namespace portable

#if defined(COMMTUNE_DITHERING_SIMD)
// ISA flags only (no arch=): the baseline inline helpers above still inline.
#pragma GCC push_options
#pragma GCC target("avx,avx2,bmi,bmi2,popcnt,lzcnt,fma")
namespace avx2 {
#define COMMTUNE_CODEC_LEVEL 3
#include "kernels/cpu/dithering_codec.inc"
#undef COMMTUNE_CODEC_LEVEL
}  // namespace avx2
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl")
// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined"
// vector that -Wmaybe-uninitialized reports once inlined (GCC bug 105593,
// fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace avx512 {
#define COMMTUNE_CODEC_LEVEL 4
#include "kernels/cpu/dithering_codec.inc"
#undef COMMTUNE_CODEC_LEVEL
}  // namespace avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

}  // namespace

// Levels of x[first, first + count) into q; linear levels in a loop the
// compiler vectorises.
COMMTUNE_CPU_CLONES_AVX512 void cpu::dithering_levels(const float* x, std::int64_t first, std::int64_t count,
                                                      float inverse, const DitheringOptions& o, std::uint64_t key,
                                                      std::uint8_t* q) {
  if (o.natural) {
    for (std::int64_t j = 0; j < count; ++j) {
      const auto i = static_cast<std::uint32_t>(first + j);
      q[j] = quantise_natural(std::min(std::fabs(x[first + j]) * inverse, 1.0f), dithering_draw(i, key), o);
    }
    return;
  }
  // Selects, not branches (and -fno-trapping-math for this file): the loop vectorises.
  const float scale = linear_scale(inverse, o.levels), top = static_cast<float>(o.levels) * kFixedOne;
  for (std::int64_t j = 0; j < count; ++j) {
    const auto i = static_cast<std::uint32_t>(first + j);
    float scaled = std::fabs(x[first + j]) * scale;
    scaled = scaled < top ? scaled : top;
    q[j] = static_cast<std::uint8_t>(linear_level(static_cast<std::int32_t>(scaled), dithering_draw_bits(i, key)));
  }
}

std::size_t dithering_max_bytes(std::int64_t n, const DitheringOptions& o) {
  // The details: per nonzero a sign and at most s - 1 rank bits, and the 8
  // bytes their writer may store past their end.
  const auto detail_bits = static_cast<std::size_t>(std::max<std::int64_t>(o.levels, 1));
  return kHeaderBytes + position_capacity(n) + (static_cast<std::size_t>(n) * detail_bits + 7) / 8 + 8;
}

std::size_t cpu::dithering_encode(SimdBuild build, const float* x, std::int64_t n, const DitheringOptions& o,
                                  Xorshift128p& rng, std::uint8_t* out) {
#if defined(COMMTUNE_DITHERING_SIMD)
  if (build == SimdBuild::avx512) return avx512::encode(x, n, o, rng, out);
  if (build == SimdBuild::avx2) return avx2::encode(x, n, o, rng, out);
#endif
  (void)build;
  return portable::encode(x, n, o, rng, out);
}

void cpu::dithering_decode(SimdBuild build, bool accumulate, const std::uint8_t* in, std::size_t bytes, std::int64_t n,
                           const DitheringOptions& o, float weight, float* out) {
  auto decoder = accumulate ? portable::decode<true> : portable::decode<false>;
#if defined(COMMTUNE_DITHERING_SIMD)
  if (build == SimdBuild::avx512) decoder = accumulate ? avx512::decode<true> : avx512::decode<false>;
  if (build == SimdBuild::avx2) decoder = accumulate ? avx2::decode<true> : avx2::decode<false>;
#endif
  (void)build;
  decoder(in, bytes, n, o, weight, out);
}

std::size_t dithering_encode(const float* x, std::int64_t n, const DitheringOptions& o, Xorshift128p& rng,
                             std::uint8_t* out) {
  return cpu::dithering_encode(cpu::bit_coder_build(), x, n, o, rng, out);
}

void dithering_decode_add(const std::uint8_t* in, std::size_t bytes, std::int64_t n, const DitheringOptions& o,
                          float weight, float* out) {
  cpu::dithering_decode(cpu::bit_coder_build(), true, in, bytes, n, o, weight, out);
}

void dithering_decode(const std::uint8_t* in, std::size_t bytes, std::int64_t n, const DitheringOptions& o,
                      float weight, float* out) {
  cpu::dithering_decode(cpu::bit_coder_build(), false, in, bytes, n, o, weight, out);
}

}  // namespace commtune::kernels

// BytePS-style compressors: what each keeps exactly, the size of its
// payload against the format's formula, the unbiasedness of the randomised
// ones (measured), and error feedback's exact accounting.
#include <gtest/gtest.h>
#include <numeric>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/engine/compress/compressor.h"
#include "kernels/compress.h"
#include "kernels/cpu/dispatch.h"

using namespace commtune;

namespace {

std::vector<float> random_vector(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = normal(gen);
  return x;
}

CompressorOptions options(const std::string& type, double k = 0.01) {
  CompressorOptions o;
  o.byteps_compressor_type = type;
  o.byteps_compressor_k = k;
  return o;
}

// Compresses a copy of x and decodes it: (decoded, payload bytes).
std::pair<std::vector<float>, std::size_t> round_trip(Compressor& c, std::vector<float> x) {
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::uint8_t> payload(c.max_payload_bytes(n));
  const auto bytes = c.compress(x.data(), n, payload.data());
  std::vector<float> out(x.size(), 0.0f);
  c.decompress_add(payload.data(), bytes, n, 1.0f, out.data());
  return {out, bytes};
}

// A copy of `size` bytes that ends where an unreadable page begins: a
// decoder that reads past its input crashes the test instead of reading
// whatever follows.
class GuardedBytes {
 public:
  GuardedBytes(const std::uint8_t* bytes, std::size_t size) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    length_ = (size + page - 1) / page * page + page;
    void* base = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<std::uint8_t*>(base);
    if (mprotect(base_ + length_ - page, page, PROT_NONE) != 0) throw std::runtime_error("mprotect failed");
    data_ = base_ + length_ - page - size;
    std::memcpy(data_, bytes, size);
  }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  ~GuardedBytes() { munmap(base_, length_); }
  const std::uint8_t* data() const { return data_; }

 private:
  std::uint8_t* base_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::size_t length_ = 0;
};

}  // namespace

TEST(Compressors, OnebitKeepsSignsAndTheMeanMagnitude) {
  const auto x = random_vector(1000, 1);
  double mean_abs = 0;
  for (float v : x) mean_abs += std::fabs(v);
  mean_abs /= x.size();
  for (bool scaled : {true, false}) {
    auto o = options("onebit");
    o.byteps_compressor_onebit_scaling = scaled;
    auto c = make_compressor(o, 1000, 0);
    const auto [out, bytes] = round_trip(*c, x);
    EXPECT_EQ(bytes, 4u + 4u * 32u);  // the scale, then ceil(1000 / 32) words
    const float scale = scaled ? static_cast<float>(mean_abs) : 1.0f;
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(out[i], x[i] < 0 ? -scale : scale) << i;
  }
}

TEST(Compressors, TopkOnLargeInputsIsExactWithTiesToTheLowerIndex) {
  // Large enough for the sampled threshold; magnitudes on a coarse grid, so
  // the k-th largest is tied many times and the tie rule decides.
  for (const std::int64_t n : {40000, 300001}) {
    std::mt19937 rng(static_cast<unsigned>(n));
    std::uniform_int_distribution<int> level(-400, 400);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = static_cast<float>(level(rng)) / 16.0f;
    for (const std::int64_t k : {std::int64_t{1}, n / 100, n / 20}) {
      std::vector<std::uint32_t> order(x.size());
      std::iota(order.begin(), order.end(), 0u);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::uint32_t a, std::uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
      std::vector<std::uint32_t> expected(order.begin(), order.begin() + k);
      std::sort(expected.begin(), expected.end());
      std::vector<std::uint32_t> indices(static_cast<std::size_t>(k));
      std::vector<float> values(static_cast<std::size_t>(k));
      commtune::kernels::topk_select(x.data(), n, k, indices.data(), values.data());
      ASSERT_EQ(indices, expected) << "n " << n << " k " << k;
      for (std::int64_t j = 0; j < k; ++j) ASSERT_EQ(values[j], x[indices[j]]);
    }
  }
}

TEST(Compressors, TopkKeepsExactlyTheLargest) {
  const auto x = random_vector(5000, 2);
  for (double k : {1.0, 37.0, 0.01, 0.5}) {
    auto c = make_compressor(options("topk", k), 5000, 0);
    const auto kept = resolve_k(k, 5000);
    const auto [out, bytes] = round_trip(*c, x);
    EXPECT_EQ(bytes, 8u * static_cast<std::size_t>(kept));
    std::vector<float> magnitudes;
    for (float v : x) magnitudes.push_back(std::fabs(v));
    std::sort(magnitudes.rbegin(), magnitudes.rend());
    const float threshold = magnitudes[static_cast<std::size_t>(kept) - 1];
    std::int64_t nonzero = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(out[i], std::fabs(x[i]) >= threshold ? x[i] : 0.0f) << "k " << k << " element " << i;
      nonzero += out[i] != 0.0f;
    }
    EXPECT_EQ(nonzero, kept);
  }
  EXPECT_EQ(resolve_k(0.01, 5000), 50);
  EXPECT_EQ(resolve_k(10000, 5000), 5000);
}

TEST(Compressors, OnebitTakesTheSignAsBytepsDoes) {
  // BytePS packs `x < 0` (impl/onebit.cc): -0 and NaN decode to +scale, in every build.
  std::vector<float> x(70, 0.5f);
  x[0] = -0.0f, x[1] = 0.0f, x[2] = -1.0f, x[3] = std::nanf(""), x[40] = -0.0f, x[69] = -2.0f;
  for (const auto build : kernels::cpu::simd_builds()) {
    std::vector<std::uint32_t> words(3);
    kernels::cpu::onebit_pack(build, x.data(), 70, false, words.data());
    const auto negative = [&words](int i) { return (words[i / 32] >> (i % 32)) & 1u; };
    for (int i = 0; i < 70; ++i)
      ASSERT_EQ(negative(i), i == 2 || i == 69 ? 1u : 0u) << kernels::cpu::name_of(build) << " element " << i;
  }
}

TEST(Compressors, RandomkDrawsAsBytepsAndDecodesRepeatsOnce) {
  // BytePS's XorShift128PlusBitShifterRNG with set_seed(7): state {7, 7}, Randint(0, n) = next() % n.
  std::uint64_t a = 7, b = 7;
  auto next = [&a, &b] {
    std::uint64_t t = a;
    const std::uint64_t s = b;
    a = s;
    t ^= t << 23;
    t ^= t >> 17;
    t ^= s ^ (s >> 26);
    b = t;
    return t + s;
  };
  const std::int64_t n = 10, k = 8;  // 8 draws of 10: repeats are likely (and happen with this seed)
  auto o = options("randomk", static_cast<double>(k));
  o.byteps_seed = 7;
  o.byteps_ef_type = "vanilla";
  auto c = make_compressor(o, n, /*stream=*/12345);  // a seed makes the stream irrelevant
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 1.0f);
  std::vector<std::uint8_t> payload(c->max_payload_bytes(n));
  auto p = x;
  c->compress(p.data(), n, payload.data());
  std::vector<std::uint32_t> drawn(k);
  std::memcpy(drawn.data(), payload.data(), 4 * k);
  std::vector<float> expected(n, 0.0f);
  bool repeated = false;
  for (std::int64_t j = 0; j < k; ++j) {
    const auto index = next() % static_cast<std::uint64_t>(n);
    ASSERT_EQ(drawn[j], index) << "draw " << j;
    repeated |= expected[index] != 0.0f;
    expected[index] = x[index];
  }
  ASSERT_TRUE(repeated) << "pick a seed whose draws repeat an index";
  std::vector<float> added(n, 0.0f), written(n, 3.0f);
  c->decompress_add(payload.data(), payload.size(), n, 1.0f, added.data());
  c->decompress(payload.data(), payload.size(), n, 1.0f, written.data());
  EXPECT_EQ(added, expected);
  EXPECT_EQ(written, expected);
  // Error feedback keeps exactly what was not sent: zero at every drawn index, repeats included.
  std::vector<float> zero(n, 0.0f);
  c->compress(zero.data(), n, payload.data());
  for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(zero[i], expected[i] != 0.0f ? 0.0f : x[i]) << i;
}

TEST(Compressors, ErrorFeedbackRescalesByTheLearningRateRatio) {
  // vanilla_error_feedback.cc: p = g + (lr_prev / lr) e.
  auto o = options("topk", 1);
  o.byteps_ef_type = "vanilla";
  auto c = make_compressor(o, 2, 0);
  std::vector<std::uint8_t> payload(c->max_payload_bytes(2));
  std::vector<float> g{4.0f, 1.0f};
  c->set_learning_rate(0.1);
  c->compress(g.data(), 2, payload.data());  // sends 4, keeps e = (0, 1)
  std::vector<float> zero{0.0f, 0.0f};
  c->set_learning_rate(0.4);
  c->compress(zero.data(), 2, payload.data());  // p = 0 + (0.1 / 0.4) e
  EXPECT_EQ(zero[1], 0.25f);
}

TEST(Compressors, RandomkRescaledIsUnbiased) {
  const std::int64_t n = 200;
  const auto x = random_vector(n, 3);
  auto o = options("randomk", 20);
  o.byteps_compressor_randomk_rescale = true;
  auto c = make_compressor(o, n, 5);
  const int trials = 20000;
  std::vector<double> mean(n, 0.0);
  for (int t = 0; t < trials; ++t) {
    const auto [out, bytes] = round_trip(*c, x);
    ASSERT_EQ(bytes, 8u * 20u);
    for (std::int64_t i = 0; i < n; ++i) mean[i] += out[i] / trials;
  }
  // Each draw's estimate of x_i has variance about x_i^2 (n/k - 1) = 9 x_i^2:
  // the mean of 20000 is within 5 standard errors of x_i.
  for (std::int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(mean[i], x[i], 5 * std::sqrt(9.0 * x[i] * x[i] / trials) + 1e-6) << i;
}

TEST(Compressors, DitheringIsUnbiasedOnItsLevels) {
  const std::int64_t n = 300;
  const auto x = random_vector(n, 4);
  for (int partition : {0, 1})
    for (int normalize : {0, 1}) {
      auto o = options("dithering", 4);
      o.byteps_dithering_partition = partition;
      o.byteps_dithering_normalize = normalize;
      auto c = make_compressor(o, n, 6);
      double norm = 0;
      for (float v : x) norm = normalize ? norm + v * v : std::max<double>(norm, std::fabs(v));
      if (normalize) norm = std::sqrt(norm);
      const int trials = 4000;
      std::vector<double> mean(n, 0.0);
      for (int t = 0; t < trials; ++t) {
        const auto [out, bytes] = round_trip(*c, x);
        ASSERT_LE(bytes, c->max_payload_bytes(n));
        for (std::int64_t i = 0; i < n; ++i) {
          // Every decoded value is sign * norm * level.
          const double level = std::fabs(out[i]) / norm;
          const double scaled = partition ? std::log2(level) + 4 : level * 4;
          if (out[i] != 0) {
            ASSERT_NEAR(scaled, std::round(scaled), 1e-4) << "level " << level;
            ASSERT_EQ(std::signbit(out[i]), std::signbit(x[i]));
          }
          mean[i] += out[i] / trials;
        }
      }
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(mean[i], x[i], 5 * norm / std::sqrt(trials)) << "partition " << partition << " norm " << normalize;
    }
}

TEST(Compressors, DitheringVarianceIsItsRoundingsOwn) {
  // Stochastic rounding between the two levels around |x_i|/norm, a gap g
  // apart, with p the distance to the lower one over g: variance (norm g)^2
  // p (1 - p), which the paper's bound (variance <= (norm g)^2 / 4 per element)
  // caps. The measured total over 4000 trials is within 10% of the exact sum.
  const std::int64_t n = 256;
  const auto x = random_vector(n, 11);
  for (int partition : {0, 1}) {
    const int s = 4;
    auto o = options("dithering", s);
    o.byteps_dithering_partition = partition;
    auto c = make_compressor(o, n, 13);
    double norm = 0;
    for (float v : x) norm = std::max<double>(norm, std::fabs(v));
    std::vector<double> levels{0.0};  // linear {0, 1/s, .., 1}; natural {0, 2^(1-s), .., 1/2, 1}
    for (int j = 1; j <= s; ++j) levels.push_back(partition == 0 ? double(j) / s : std::ldexp(1.0, j - s));
    double expected = 0, bound = 0;
    for (float v : x) {
      const double r = std::fabs(v) / norm;
      const auto above = std::upper_bound(levels.begin(), levels.end(), r);
      const double high = above == levels.end() ? 1.0 : *above, low = above == levels.end() ? 1.0 : *(above - 1);
      const double gap = high - low, p = gap > 0 ? (r - low) / gap : 0;
      expected += norm * norm * gap * gap * p * (1 - p);
      bound += norm * norm * gap * gap / 4;
    }
    const int trials = 4000;
    double measured = 0;
    for (int t = 0; t < trials; ++t) {
      const auto [out, bytes] = round_trip(*c, x);
      for (std::int64_t i = 0; i < n; ++i) measured += (out[i] - x[i]) * (out[i] - x[i]) / trials;
    }
    EXPECT_NEAR(measured, expected, 0.1 * expected) << "partition " << partition;
    EXPECT_LE(measured, 1.1 * bound) << "partition " << partition;
  }
}

TEST(Compressors, DitheringPayloadIsItsEntropyCode) {
  // One level and equal magnitudes: every element is nonzero at rank 1, the
  // positions are a bitmap (k = 0, 1000 bits), the details one sign each.
  std::vector<float> x(1000, 0.5f);
  for (std::size_t i = 0; i < x.size(); i += 3) x[i] = -0.5f;
  auto c = make_compressor(options("dithering", 1), 1000, 0);
  const auto [out, bytes] = round_trip(*c, x);
  EXPECT_EQ(bytes, 16u + 125u + 125u);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i]);
  const std::vector<float> zeros(100, 0.0f);
  EXPECT_EQ(round_trip(*c, zeros).second, 16u);
}

// The stream's size from what it decodes to: 16 header bytes, the positions
// (a bitmap up to the last nonzero when k = 0, else Rice codes of the gaps:
// (gap - 1) >> k zeros, a one, k bits), then per nonzero its sign and
// min(rank, s - 1) plane bits (rank counted from the bottom for linear
// levels, from the top for natural ones).
TEST(Compressors, DitheringPayloadBytesFollowTheFormula) {
  const std::int64_t n = 20000;
  for (int levels : {1, 2, 4, 16})
    for (int partition : {0, 1})
      for (int normalize : {0, 1})
        for (double spread : {1.0, 30.0}) {  // 30: a few large elements, most levels zero (k > 0)
          auto x = random_vector(n, 11);
          for (std::int64_t i = 0; i < n; i += 97) x[static_cast<std::size_t>(i)] *= static_cast<float>(spread);
          auto o = options("dithering", levels);
          o.byteps_dithering_partition = partition;
          o.byteps_dithering_normalize = normalize;
          o.byteps_min_compress_bytes = 0;
          auto c = make_compressor(o, n, 3);
          std::vector<std::uint8_t> payload(c->max_payload_bytes(n));
          auto input = x;
          const std::size_t bytes = c->compress(input.data(), n, payload.data());
          std::vector<float> out(static_cast<std::size_t>(n), 0.0f);
          c->decompress_add(payload.data(), bytes, n, 1.0f, out.data());
          float norm;
          std::memcpy(&norm, payload.data(), 4);
          const int k = payload[12];
          std::uint64_t nonzeros = 0, position_bits = 0, detail_bits = 0;
          std::int64_t previous = -1;
          for (std::int64_t i = 0; i < n; ++i) {
            const float v = std::fabs(out[static_cast<std::size_t>(i)]);
            if (v == 0) continue;
            const double level = partition ? std::log2(v / norm) + levels : v / norm * levels;
            const auto q = static_cast<int>(std::lround(level));
            const int rank = partition ? levels + 1 - q : q;
            ASSERT_GE(rank, 1);
            ASSERT_LE(rank, levels);
            ++nonzeros;
            const auto gap = static_cast<std::uint64_t>(i - previous);
            position_bits = k == 0 ? static_cast<std::uint64_t>(i + 1) : position_bits + ((gap - 1) >> k) + 1 + k;
            detail_bits += 1 + static_cast<std::uint64_t>(std::min(rank, levels - 1));
            previous = i;
          }
          ASSERT_GT(nonzeros, 0u);
          // Golomb's parameter for the mean gap, as a power of two.
          const double m = std::log(2.0) * static_cast<double>(n) / static_cast<double>(nonzeros);
          EXPECT_EQ(k, m < 2 ? 0 : static_cast<int>(std::floor(std::log2(m))));
          EXPECT_EQ(bytes, 16 + (position_bits + 7) / 8 + (detail_bits + 7) / 8)
              << "s " << levels << " partition " << partition << " l2 " << normalize << " spread " << spread;
          EXPECT_LE(bytes, c->max_payload_bytes(n));
          if (spread > 1 && normalize == 0 && partition == 0) {
            EXPECT_GT(k, 0) << "s " << levels;
          }
        }
}

TEST(Compressors, TopkBuildsAgree) {
  const auto builds = kernels::cpu::simd_builds();
  if (builds.size() < 2) GTEST_SKIP() << "this CPU has no AVX2 + BMI2: only the portable build runs";
  for (const std::int64_t n : {40000, 300001}) {
    auto x = random_vector(n, static_cast<unsigned>(n));
    x[static_cast<std::size_t>(n - 1)] = 50.0f;  // in the tail the vector passes leave
    for (const std::int64_t k : {std::int64_t{1}, n / 100, n / 20}) {
      std::vector<std::uint32_t> expected_indices(static_cast<std::size_t>(k)), indices(expected_indices.size());
      std::vector<float> expected_values(expected_indices.size()), values(expected_indices.size());
      kernels::cpu::topk_select(kernels::cpu::SimdBuild::portable, x.data(), n, k, expected_indices.data(),
                                expected_values.data());
      for (const auto build : builds) {
        kernels::cpu::topk_select(build, x.data(), n, k, indices.data(), values.data());
        const auto label =
            std::string(kernels::cpu::name_of(build)) + " n " + std::to_string(n) + " k " + std::to_string(k);
        ASSERT_EQ(indices, expected_indices) << label;
        ASSERT_EQ(values, expected_values) << label;
      }
    }
  }
}

TEST(Compressors, OnebitBuildsAgreeBitForBit) {
  const auto builds = kernels::cpu::simd_builds();
  if (builds.size() < 2) GTEST_SKIP() << "this CPU has no AVX2 + BMI2: only the portable build runs";
  using kernels::cpu::SimdBuild;
  for (std::int64_t n : {1, 31, 33, 64, 100, 4095, 4096, 4097, 100003}) {
    const auto x = random_vector(n, static_cast<unsigned>(n));
    const auto words = static_cast<std::size_t>((n + 31) / 32);
    std::vector<std::uint32_t> reference(words);
    const float scale = kernels::cpu::onebit_pack(SimdBuild::portable, x.data(), n, true, reference.data());
    std::vector<float> added(x.size(), 1.0f), written(x.size(), 7.0f);
    kernels::cpu::onebit_unpack(SimdBuild::portable, true, reference.data(), n, scale, 0.5f, added.data());
    kernels::cpu::onebit_unpack(SimdBuild::portable, false, reference.data(), n, scale, 0.5f, written.data());
    for (const auto build : builds) {
      const auto label = std::string(kernels::cpu::name_of(build)) + " n " + std::to_string(n);
      std::vector<std::uint32_t> packed(words);
      ASSERT_EQ(kernels::cpu::onebit_pack(build, x.data(), n, true, packed.data()), scale) << label;
      ASSERT_EQ(packed, reference) << label;
      std::vector<float> out(x.size(), 1.0f);
      kernels::cpu::onebit_unpack(build, true, reference.data(), n, scale, 0.5f, out.data());
      ASSERT_EQ(out, added) << label;
      std::fill(out.begin(), out.end(), 7.0f);
      kernels::cpu::onebit_unpack(build, false, reference.data(), n, scale, 0.5f, out.data());
      ASSERT_EQ(out, written) << label;
    }
  }
}

TEST(Compressors, DitheringBuildsAgreeByteForByte) {
  const auto builds = kernels::cpu::simd_builds();
  if (builds.size() < 2) GTEST_SKIP() << "this CPU has no AVX2 + BMI2: only the portable build runs";
  using kernels::cpu::SimdBuild;
  for (std::int64_t n : {1, 63, 64, 65, 1000, 70001})
    for (int levels : {1, 3, 7, 8, 16, 31})
      for (bool natural : {false, true}) {
        kernels::DitheringOptions o;
        o.levels = levels;
        o.natural = natural;
        o.l2_norm = levels == 8;
        auto x = random_vector(n, static_cast<unsigned>(n + levels));
        for (std::int64_t i = 0; i < n; i += 500) x[static_cast<std::size_t>(i)] *= 40.0f;  // sparse for l2
        const auto max_bytes = kernels::dithering_max_bytes(n, o);
        std::vector<std::uint8_t> reference(max_bytes);
        auto rng = kernels::Xorshift128p::seeded(5);
        const auto bytes = kernels::cpu::dithering_encode(SimdBuild::portable, x.data(), n, o, rng, reference.data());
        // Added onto ones, and written over a value decoding never gives.
        std::vector<float> added(static_cast<std::size_t>(n), 1.0f), written(added.size(), 7.0f);
        kernels::cpu::dithering_decode(SimdBuild::portable, true, reference.data(), bytes, n, o, 0.5f, added.data());
        kernels::cpu::dithering_decode(SimdBuild::portable, false, reference.data(), bytes, n, o, 0.5f, written.data());
        for (std::size_t i = 0; i < added.size(); ++i) ASSERT_EQ(written[i] + 1.0f, added[i]) << i;
        for (const auto build : builds) {
          const auto label = std::string(kernels::cpu::name_of(build)) + " n " + std::to_string(n) + " s " +
                             std::to_string(levels) + (natural ? " natural" : " linear");
          std::vector<std::uint8_t> payload(max_bytes);
          auto same_rng = kernels::Xorshift128p::seeded(5);
          ASSERT_EQ(kernels::cpu::dithering_encode(build, x.data(), n, o, same_rng, payload.data()), bytes) << label;
          ASSERT_TRUE(
              std::equal(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(bytes), reference.begin()))
              << label;
          std::vector<float> out(static_cast<std::size_t>(n), 1.0f);
          kernels::cpu::dithering_decode(build, true, reference.data(), bytes, n, o, 0.5f, out.data());
          ASSERT_EQ(out, added) << label;
          std::fill(out.begin(), out.end(), 7.0f);
          kernels::cpu::dithering_decode(build, false, reference.data(), bytes, n, o, 0.5f, out.data());
          ASSERT_EQ(out, written) << label;
        }
      }
}

TEST(Compressors, BitCodersAvoidMicrocodedBitDeposit) {
  using kernels::cpu::bit_deposit_is_microcoded;
  EXPECT_TRUE(bit_deposit_is_microcoded("AuthenticAMD", 0x15));   // Excavator
  EXPECT_TRUE(bit_deposit_is_microcoded("AuthenticAMD", 0x17));   // Zen 1, Zen 2
  EXPECT_TRUE(bit_deposit_is_microcoded("HygonGenuine", 0x18));   // Dhyana
  EXPECT_FALSE(bit_deposit_is_microcoded("AuthenticAMD", 0x19));  // Zen 3, Zen 4
  EXPECT_FALSE(bit_deposit_is_microcoded("AuthenticAMD", 0x1a));  // Zen 5
  EXPECT_FALSE(bit_deposit_is_microcoded("GenuineIntel", 6));
  const auto builds = kernels::cpu::simd_builds();
  EXPECT_NE(std::find(builds.begin(), builds.end(), kernels::cpu::bit_coder_build()), builds.end());
}

TEST(Compressors, DamagedDitheringPayloadsAreRefused) {
  // A dense tensor (positions as a bitmap) and a sparse one (Rice-coded gaps).
  const std::int64_t n = 5000;
  auto dense = random_vector(n, 21), sparse = dense;
  for (std::size_t i = 0; i < sparse.size(); ++i)
    if (i % 10 != 3) sparse[i] = 0.0f;
  kernels::DitheringOptions o;
  o.levels = 4;
  std::vector<float> out(static_cast<std::size_t>(n));
  for (const auto& x : {dense, sparse}) {
    std::vector<std::uint8_t> payload(kernels::dithering_max_bytes(n, o));
    auto rng = kernels::Xorshift128p::seeded(1);
    const auto bytes = kernels::dithering_encode(x.data(), n, o, rng, payload.data());
    for (const auto build : kernels::cpu::simd_builds())
      for (bool accumulate : {true, false}) {
        const auto label = std::string(kernels::cpu::name_of(build)) + (accumulate ? " adding" : " writing");
        auto decode = [&](const std::uint8_t* in, std::size_t size, std::int64_t elements) {
          kernels::cpu::dithering_decode(build, accumulate, in, size, elements, o, 1.0f, out.data());
        };
        // Cut short anywhere: an error, never a read past the end (the
        // bytes end at an unreadable page).
        for (std::size_t cut = 0; cut < bytes; cut += 7) {
          const GuardedBytes prefix(payload.data(), cut);
          EXPECT_THROW(decode(prefix.data(), cut, n), std::runtime_error) << label << " cut " << cut;
        }
        const GuardedBytes whole(payload.data(), bytes);
        EXPECT_NO_THROW(decode(whole.data(), bytes, n)) << label;
        // A tensor shorter than the stream says.
        EXPECT_THROW(decode(whole.data(), bytes, n / 2), std::runtime_error) << label;
        // A header from another format.
        auto damaged = payload;
        damaged[12] = 200;
        EXPECT_THROW(decode(damaged.data(), bytes, n), std::runtime_error) << label;
      }
  }
}

TEST(Compressors, DecompressWritesWhatDecompressAddAddsToZeros) {
  const std::int64_t n = 1000;
  for (const char* type : {"onebit", "topk", "randomk", "dithering"}) {
    auto c = make_compressor(options(type, std::string(type) == "dithering" ? 4.0 : 0.05), n, 2);
    auto x = random_vector(n, 31);
    std::vector<std::uint8_t> payload(c->max_payload_bytes(n));
    const auto bytes = c->compress(x.data(), n, payload.data());
    std::vector<float> added(static_cast<std::size_t>(n), 0.0f), written(static_cast<std::size_t>(n), 7.0f);
    c->decompress_add(payload.data(), bytes, n, 0.25f, added.data());
    c->decompress(payload.data(), bytes, n, 0.25f, written.data());
    EXPECT_EQ(written, added) << type;
  }
}

TEST(Compressors, ErrorFeedbackAccountsForEveryBit) {
  // Over T steps: the sum of what was sent plus the final error equals the
  // sum of the gradients (p_t = g_t + e_{t-1}, e_t = p_t - D(C(p_t))).
  const std::int64_t n = 4096;
  for (const char* type : {"onebit", "topk", "randomk", "dithering"}) {
    auto o = options(type, std::string(type) == "dithering" ? 2.0 : 0.05);
    o.byteps_ef_type = "vanilla";
    auto c = make_compressor(o, n, 9);
    std::vector<double> sent(n, 0.0), given(n, 0.0);
    for (int t = 0; t < 20; ++t) {
      auto g = random_vector(n, 100 + t);
      for (std::int64_t i = 0; i < n; ++i) given[i] += g[i];
      const auto [out, bytes] = round_trip(*c, g);
      for (std::int64_t i = 0; i < n; ++i) sent[i] += out[i];
    }
    std::vector<std::uint8_t> state;
    c->save(state);
    std::vector<float> error(n);
    // The state ends with the error, then the previous learning rate (a double).
    std::memcpy(error.data(), state.data() + state.size() - 8 - 4 * n, 4 * n);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(sent[i] + error[i], given[i], 1e-4) << type << " " << i;
  }
}

TEST(Compressors, NesterovMomentumFollowsItsFormula) {
  const std::int64_t n = 64;
  auto o = options("topk", 64.0);  // keeps everything: the payload is p itself
  o.byteps_momentum_type = "nesterov";
  o.byteps_momentum_mu = 0.9;
  auto c = make_compressor(o, n, 0);
  std::vector<float> m(n, 0.0f);
  for (int t = 0; t < 5; ++t) {
    const auto g = random_vector(n, 200 + t);
    const auto [out, bytes] = round_trip(*c, g);
    for (std::int64_t i = 0; i < n; ++i) {
      m[i] = 0.9f * m[i] + g[i];
      ASSERT_FLOAT_EQ(out[i], g[i] + 0.9f * m[i]);
    }
  }
}

TEST(Compressors, BadSettingsNameTheField) {
  auto o = options("dithering", 2.5);
  try {
    make_compressor(o, 100, 0);
    FAIL() << "fractional dithering levels were accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "hook.byteps_compressor_k");
  }
}

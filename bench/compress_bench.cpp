// Compressors: compress + decompress throughput (input bytes / the time of
// both) at 1M, 16M and 64M float32 elements, next to memcpy of the same bytes
// measured in the same run. Goals (ratio to memcpy): onebit and randomk >= 0.5,
// dithering >= 0.2, topk >= 0.1. Then the kernels that come in builds, per build.
//
//   build/bench/compress_bench [elements...]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench/bench_timing.h"
#include "core/engine/compress/compressor.h"
#include "kernels/compress.h"
#include "kernels/cpu/dispatch.h"

using namespace commtune;

namespace {

// The kernels that come in builds, per build this CPU runs (the table above
// uses the last): topk's selection, onebit's pack and unpack, dithering's
// encode and decode.
void print_builds(const std::vector<float>& x, int batches) {
  const auto n = static_cast<std::int64_t>(x.size());
  kernels::DitheringOptions options;
  options.levels = 4;
  std::vector<std::uint8_t> payload(kernels::dithering_max_bytes(n, options));
  std::vector<std::uint32_t> words(static_cast<std::size_t>((n + 31) / 32));
  std::vector<float> out(x.size());
  const std::int64_t k = n / 100;
  std::vector<std::uint32_t> indices(static_cast<std::size_t>(k));
  std::vector<float> values(indices.size());
  auto per_element = [n](double seconds) { return seconds / static_cast<double>(n) * 1e9; };
  for (const auto build : kernels::cpu::simd_builds()) {
    const double topk = bench::median_seconds(
        [&] { kernels::cpu::topk_select(build, x.data(), n, k, indices.data(), values.data()); }, batches);
    const double pack =
        bench::median_seconds([&] { kernels::cpu::onebit_pack(build, x.data(), n, true, words.data()); }, batches);
    const double unpack = bench::median_seconds(
        [&] { kernels::cpu::onebit_unpack(build, false, words.data(), n, 1.0f, 1.0f, out.data()); }, batches);
    auto rng = kernels::Xorshift128p::seeded(1);
    std::size_t used = 0;
    const double encode = bench::median_seconds(
        [&] { used = kernels::cpu::dithering_encode(build, x.data(), n, options, rng, payload.data()); }, batches);
    const double decode = bench::median_seconds(
        [&] { kernels::cpu::dithering_decode(build, false, payload.data(), used, n, options, 1.0f, out.data()); },
        batches);
    std::printf(
        "    %-8s build: topk k=1%% select %.3f; onebit pack %.3f, unpack %.3f; dithering s=4 encode %.3f, decode %.3f "
        "ns per element\n",
        kernels::cpu::name_of(build), per_element(topk), per_element(pack), per_element(unpack), per_element(encode),
        per_element(decode));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes{1 << 20, 16 << 20, 64 << 20};
  if (argc > 1) {
    sizes.clear();
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  }
  struct Case {
    const char* label;
    CompressorOptions options;
    double goal;
  };
  std::vector<Case> cases;
  auto add = [&](const char* label, const char* type, double k, double goal) {
    CompressorOptions o;
    o.byteps_compressor_type = type;
    o.byteps_compressor_k = k;
    cases.push_back({label, o, goal});
  };
  add("onebit (scaled)", "onebit", 0, 0.5);
  add("randomk k=1%", "randomk", 0.01, 0.5);
  add("dithering s=4", "dithering", 4, 0.2);
  add("topk k=1%", "topk", 0.01, 0.1);
  // The decorators' own cost next to bare onebit (no goal of its own). They
  // change their input on every call (its values grow); onebit's work per
  // element does not depend on the values.
  add("onebit+ef+nest.", "onebit", 0, 0.0);
  cases.back().options.byteps_ef_type = "vanilla";
  cases.back().options.byteps_momentum_type = "nesterov";

  for (const auto n : sizes) {
    std::vector<float> x(static_cast<std::size_t>(n)), out(x.size()), copy(x.size());
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    for (auto& v : x) v = normal(gen);
    const double bytes = 4.0 * static_cast<double>(n);
    const int batches = n > (1 << 22) ? 5 : 15;
    const double memcpy_s = bench::median_seconds([&] { std::memcpy(copy.data(), x.data(), bytes); }, batches);
    std::printf("%lld elements (%.0f MB): memcpy %.2f GB/s\n", static_cast<long long>(n), bytes / 1e6,
                bytes / memcpy_s / 1e9);
    for (auto& c : cases) {
      auto compressor = make_compressor(c.options, n, 0);
      std::vector<std::uint8_t> payload(compressor->max_payload_bytes(n));
      std::size_t used = 0;
      // Compress, then decode into a dense vector, as the hook decodes the
      // first rank's payload (dithering and onebit write every element, the
      // sparse ones clear it and add). Decorators change what they compress:
      // a copy, so x stays the same for the cases after them.
      std::vector<float> input = x;
      const double s = bench::median_seconds(
          [&] {
            used = compressor->compress(input.data(), n, payload.data());
            compressor->decompress(payload.data(), used, n, 1.0f, out.data());
          },
          batches);
      const double ratio = memcpy_s / s;
      std::printf("  %-16s %7.2f GB/s  ratio %.2f of memcpy", c.label, bytes / s / 1e9, ratio);
      if (c.goal > 0) std::printf(" (goal %.1f: %s)", c.goal, ratio >= c.goal ? "met" : "MISSED");
      std::printf("  payload %.4f of the input\n", used / bytes);
    }
    print_builds(x, batches);
  }
  return 0;
}

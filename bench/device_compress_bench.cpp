// The compressed hook's device path (core/engine/compress/device_compressor.h):
// compress + decode one payload (encode + decode, as a rank does per bucket
// and peer) on the bucket's device, as bandwidth (the bucket's bytes / the
// time of both) over the same device's copy of the bucket, measured in the
// same run. On a GPU (CUDA) that is the goal the hook is held to (and marked): onebit
// >= 0.5 of a device memcpy, with no copy to the host. Without a GPU it runs
// on CPU tensors, next to the host path (the bucket as raw floats), which
// is what a CPU bucket takes.
//
//   build/bench/device_compress_bench [elements...]      (default 1M and 16M)
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_timing.h"
#include "core/engine/compress/compressor.h"
#include "core/engine/compress/device_compressor.h"

using namespace commtune;

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes{1 << 20, 16 << 20};
  if (argc > 1) {
    sizes.clear();
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  }
  const bool cuda = torch::cuda::is_available();
  const at::Device device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  auto sync = [cuda] {
    if (cuda) torch::cuda::synchronize();
  };
  struct Case {
    const char* label;
    CompressorOptions options;
    double goal;
  };
  std::vector<Case> cases;
  auto add = [&](const char* label, const char* type, double goal) {
    CompressorOptions o;
    o.byteps_compressor_type = type;
    o.byteps_compressor_k = 0.01;
    cases.push_back({label, o, goal});
  };
  add("onebit (scaled)", "onebit", 0.5);
  add("randomk k=1%", "randomk", 0.0);
  add("topk k=1%", "topk", 0.0);
  add("onebit+ef+nest.", "onebit", 0.0);
  cases.back().options.byteps_ef_type = "vanilla";
  cases.back().options.byteps_momentum_type = "nesterov";

  std::printf("device: %s\n", cuda ? "CUDA (GPU 0)" : "CPU (no GPU here: the device path on CPU tensors)");
  for (const auto n : sizes) {
    const auto x = torch::randn({n}, torch::dtype(torch::kFloat).device(device));
    auto copy = torch::empty_like(x);
    const double bytes = 4.0 * static_cast<double>(n);
    const int batches = n > (1 << 22) ? 5 : 15;
    const double memcpy_s = bench::median_seconds(
        [&] {
          copy.copy_(x);
          sync();
        },
        batches);
    std::printf("%lld elements (%.0f MB): device copy %.2f GB/s\n", static_cast<long long>(n), bytes / 1e6,
                bytes / memcpy_s / 1e9);
    for (auto& c : cases) {
      auto compressor = make_device_compressor(c.options, n, 0, device);
      auto payload = torch::empty({compressor->payload_bytes()}, torch::dtype(torch::kByte).device(device));
      auto out = torch::zeros_like(x);
      auto input = x.clone();
      const double device_s = bench::median_seconds(
          [&] {
            input.copy_(x);
            compressor->compress(input, payload);
            compressor->decompress_add(payload, 0.5f, out);
            sync();
          },
          batches);
      std::printf("  %-16s device path %7.2f GB/s  ratio to copy %.3f%s", c.label, bytes / device_s / 1e9,
                  memcpy_s / device_s, cuda && c.goal > 0 ? (memcpy_s / device_s >= c.goal ? " (goal met)" : " (BELOW GOAL)") : "");
      if (!cuda) {  // the host path on the same bucket, for comparison
        auto host = make_compressor(c.options, n, 0);
        std::vector<std::uint8_t> bytes_out(host->max_payload_bytes(n));
        std::vector<float> decoded(static_cast<std::size_t>(n));
        auto raw = x.clone();
        const double host_s = bench::median_seconds(
            [&] {
              raw.copy_(x);
              const auto used = host->compress(raw.data_ptr<float>(), n, bytes_out.data());
              host->decompress_add(bytes_out.data(), used, n, 0.5f, decoded.data());
            },
            batches);
        std::printf("   host path %7.2f GB/s  device/host time %.2f", bytes / host_s / 1e9, device_s / host_s);
      }
      std::printf("\n");
    }
  }
  return 0;
}

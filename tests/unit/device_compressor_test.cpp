// The compressed hook's device path held to the host path: run with CPU
// tensors (the Device::Cpu kernels), each device composition must write the
// host compressor's payload byte for byte, decode to the same bits, and keep
// its state in the host's checkpoint layout, step after step. On a GPU the
// same code runs the CUDA twins, which tests/gpu/gpu_kernel_check compares
// with these kernels (scripts/gpu-check.sh).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/engine/compress/compressor.h"
#include "core/engine/compress/device_compressor.h"
#include "kernels/compress.h"
#include "kernels/cpu/dispatch.h"

using namespace commtune;

namespace {

at::Tensor gradients(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  auto t = at::empty({n}, at::kFloat);
  for (std::int64_t i = 0; i < n; ++i) t.data_ptr<float>()[i] = normal(gen);
  return t;
}

CompressorOptions device_options(const std::string& type, const std::string& ef = "none", const std::string& momentum = "none") {
  CompressorOptions o;
  o.byteps_compressor_type = type;
  o.byteps_compressor_k = 0.05;
  o.byteps_ef_type = ef;
  o.byteps_momentum_type = momentum;
  o.byteps_seed = 7;
  o.byteps_aggregation = "allgather";  // the device path's variant (its onebit scale is the blocked sum)
  return o;
}

std::vector<std::uint8_t> bytes_of(const at::Tensor& t) {
  const auto* p = t.data_ptr<std::uint8_t>();
  return {p, p + t.numel()};
}

// Steps both paths on the same gradients: payloads, decodings and states agree.
void expect_same_as_host(const CompressorOptions& o, std::int64_t n, int steps = 4) {
  SCOPED_TRACE(o.byteps_compressor_type + " ef=" + o.byteps_ef_type + " momentum=" + o.byteps_momentum_type +
               " n=" + std::to_string(n));
  auto host = make_compressor(o, n, 3);
  auto device = make_device_compressor(o, n, 3, at::kCPU);
  ASSERT_TRUE(device);
  ASSERT_EQ(static_cast<std::size_t>(device->payload_bytes()), host->max_payload_bytes(n));
  for (int step = 0; step < steps; ++step) {
    auto g = gradients(n, 100 + step);
    auto x_host = g.clone(), x_device = g.clone();
    std::vector<std::uint8_t> payload(host->max_payload_bytes(n));
    const auto used = host->compress(x_host.data_ptr<float>(), n, payload.data());
    auto device_payload = at::empty({device->payload_bytes()}, at::kByte);
    device->compress(x_device, device_payload);
    ASSERT_EQ(used, payload.size());
    ASSERT_EQ(bytes_of(device_payload), payload) << "step " << step;
    ASSERT_TRUE(at::equal(x_host, x_device)) << "the decorators fold the same memories into x";

    std::vector<float> decoded_host(static_cast<std::size_t>(n), 0.25f);
    host->decompress_add(payload.data(), used, n, 0.5f, decoded_host.data());
    auto decoded_device = at::full({n}, 0.25f, at::kFloat);
    device->decompress_add(device_payload, 0.5f, decoded_device);
    ASSERT_EQ(0, std::memcmp(decoded_host.data(), decoded_device.data_ptr<float>(), 4 * static_cast<std::size_t>(n)));
  }
  std::vector<std::uint8_t> host_state, device_state;
  host->save(host_state);
  device->save(device_state);
  EXPECT_EQ(device_state, host_state);
  // A checkpoint of one path continues in the other.
  auto resumed = make_device_compressor(o, n, 3, at::kCPU);
  std::size_t pos = 0;
  resumed->load(host_state, pos);
  EXPECT_EQ(pos, host_state.size());
  auto g = gradients(n, 999);
  auto x_host = g.clone(), x_device = g.clone();
  std::vector<std::uint8_t> payload(host->max_payload_bytes(n));
  host->compress(x_host.data_ptr<float>(), n, payload.data());
  auto device_payload = at::empty({resumed->payload_bytes()}, at::kByte);
  resumed->compress(x_device, device_payload);
  EXPECT_EQ(bytes_of(device_payload), payload);
}

}  // namespace

TEST(DeviceCompressors, WriteTheHostPayloadsByteForByte) {
  for (const std::int64_t n : {1, 31, 4096, 4096 * 3 + 77, 100003})
    for (const char* type : {"onebit", "topk", "randomk"}) expect_same_as_host(device_options(type), n);
  auto unscaled = device_options("onebit");
  unscaled.byteps_compressor_onebit_scaling = false;
  expect_same_as_host(unscaled, 5000);
  auto rescaled = device_options("randomk");
  rescaled.byteps_compressor_randomk_rescale = true;
  expect_same_as_host(rescaled, 5000);
}

TEST(DeviceCompressors, DecoratorsKeepTheHostsMemories) {
  for (const char* type : {"onebit", "topk", "randomk"}) {
    expect_same_as_host(device_options(type, "vanilla"), 20000, 6);
    expect_same_as_host(device_options(type, "none", "nesterov"), 20000, 6);
    expect_same_as_host(device_options(type, "vanilla", "nesterov"), 20000, 6);
  }
}

TEST(DeviceCompressors, OnebitScaleFollowsThePackOrder) {
  // The scale alone, as the CUDA twin computes it, against onebit_pack's.
  for (const std::int64_t n : {0, 1, 63, 64, 4095, 4096, 4097, 8192, 12345, 1 << 20}) {
    const auto x = gradients(n, 5);
    std::vector<std::uint32_t> words(static_cast<std::size_t>((n + 31) / 32) + 1);
    const float packed = kernels::onebit_pack(x.data_ptr<float>(), n, true, words.data());
    std::vector<float> partial(static_cast<std::size_t>(kernels::onebit_scale_scratch(n)) + 1);
    float scale = -1;
    kernels::onebit_scale(kernels::Device::Cpu, x.data_ptr<float>(), n, true, partial.data(), &scale);
    EXPECT_EQ(0, std::memcmp(&packed, &scale, 4)) << "n=" << n << ": " << packed << " vs " << scale;
  }
}

TEST(DeviceCompressors, DitheringAndPluginsStayOnTheHost) {
  EXPECT_FALSE(make_device_compressor(device_options("dithering"), 1000, 0, at::kCPU));
  EXPECT_FALSE(has_device_path("dithering"));
  auto bad = device_options("randomk", "vanilla");
  bad.byteps_compressor_randomk_rescale = true;
  EXPECT_THROW(make_device_compressor(bad, 1000, 0, at::kCPU), ConfigError);
}

// The compressed hook's path for a bucket that lives on a GPU: the payload
// is built where the gradients are (the kernels' CUDA twins, ATen's topk),
// gathered there and decoded there, with no copy of the bucket to the host.
// The payload's bytes and the state's layout are the host compressors'
// (compressor.h), so ranks, checkpoints and docs/compressors.md agree:
// onebit's signs and scale and randomk's draws are bit for bit the host's;
// topk keeps the same elements unless |x| ties at the k-th largest (ATen's
// topk may break ties otherwise). Dithering's entropy coding and plugins'
// compressors have no device path: make_device_compressor returns nullptr.
// The same code runs on CPU tensors (Device::Cpu kernels): that is how the
// tests hold it to the host path's bytes on a machine without a GPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/compress/compressor.h"

namespace commtune {

class DeviceCompressor {
 public:
  virtual ~DeviceCompressor() = default;
  // The payload's size for this bucket (every device composition is fixed-size).
  virtual std::int64_t payload_bytes() const = 0;
  // Packs x (float32, contiguous, n elements, on the bucket's device) into
  // `payload` (payload_bytes() bytes, same device). May change x
  // (decorators fold their memories into it).
  virtual void compress(at::Tensor& x, at::Tensor& payload) = 0;
  // out += weight * decode(payload), on their device.
  virtual void decompress_add(const at::Tensor& payload, float weight, at::Tensor& out) const = 0;
  virtual void report(std::vector<std::pair<std::string, double>>& /*stats*/) const {}
  // As Compressor::set_learning_rate.
  virtual void set_learning_rate(double /*lr*/) {}
  // As Compressor::save/load, in the same layout (memories copied to and from the host).
  virtual void save(std::vector<std::uint8_t>& /*out*/) const {}
  virtual void load(const std::vector<std::uint8_t>& /*in*/, std::size_t& /*pos*/) {}
};

// The composition the options describe, for a bucket of n elements on
// `device`; nullptr when it has no device path. `stream` as in make_compressor.
std::unique_ptr<DeviceCompressor> make_device_compressor(const CompressorOptions& options, std::int64_t n,
                                                         std::uint64_t stream, const at::Device& device);

// Whether the compressor type has a device path (the built-ins but dithering).
bool has_device_path(const std::string& compressor_type);

}  // namespace commtune

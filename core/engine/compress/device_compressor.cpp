#include "core/engine/compress/device_compressor.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/engine/kernel_bridge.h"

namespace commtune {

namespace {

// A device tensor's memory copied to the end of `out`, and back from `in`.
void append_tensor(std::vector<std::uint8_t>& out, const at::Tensor& t) {
  const auto host = t.contiguous().cpu();
  const auto* p = static_cast<const std::uint8_t*>(host.data_ptr());
  out.insert(out.end(), p, p + host.nbytes());
}

void read_tensor(const std::vector<std::uint8_t>& in, std::size_t& pos, at::Tensor& t) {
  const auto bytes = t.nbytes();
  if (pos + bytes > in.size()) throw std::runtime_error("compressor state in the checkpoint is too short");
  auto host = at::empty(t.sizes(), t.options().device(at::kCPU));
  std::memcpy(host.data_ptr(), in.data() + pos, bytes);
  t.copy_(host);
  pos += bytes;
}

std::uint32_t* words_of(at::Tensor& payload, std::int64_t offset) {
  return reinterpret_cast<std::uint32_t*>(payload.data_ptr<std::uint8_t>() + offset);
}
const std::uint32_t* words_of(const at::Tensor& payload, std::int64_t offset) {
  return reinterpret_cast<const std::uint32_t*>(payload.data_ptr<std::uint8_t>() + offset);
}

// onebit: [scale f32][ceil(n/32) sign words], as OneBit on the host.
class DeviceOneBit final : public DeviceCompressor {
 public:
  DeviceOneBit(std::int64_t n, bool scaled, const at::Device& device)
      : n_(n), scaled_(scaled), partial_(at::empty({kernels::onebit_scale_scratch(n)}, at::dtype(at::kFloat).device(device))) {}
  std::int64_t payload_bytes() const override { return 4 + 4 * ((n_ + 31) / 32); }
  void compress(at::Tensor& x, at::Tensor& payload) override {
    const auto device = kernel_device(x);
    void* stream = kernel_stream(x);
    kernels::onebit_signs(device, x.data_ptr<float>(), n_, words_of(payload, 4), stream);
    kernels::onebit_scale(device, x.data_ptr<float>(), n_, scaled_, partial_.data_ptr<float>(),
                          reinterpret_cast<float*>(payload.data_ptr<std::uint8_t>()), stream);
  }
  void decompress_add(const at::Tensor& payload, float weight, at::Tensor& out) const override {
    float scale = 0;  // 4 bytes to the host: the kernel takes scale * weight as an argument
    const auto head = payload.narrow(0, 0, 4).cpu();
    std::memcpy(&scale, head.data_ptr<std::uint8_t>(), 4);
    kernels::onebit_unpack_add(kernel_device(out), words_of(payload, 4), n_, scale, weight, out.data_ptr<float>(),
                               kernel_stream(out));
  }

 private:
  std::int64_t n_;
  bool scaled_;
  at::Tensor partial_;  // onebit_scale's scratch
};

// topk and randomk: [k u32 indices][k f32 values], as Sparse on the host.
class DeviceSparse final : public DeviceCompressor {
 public:
  DeviceSparse(bool random, std::int64_t n, std::int64_t k, bool rescale, kernels::Xorshift128p rng)
      : random_(random), n_(n), k_(k), rescale_(rescale), rng_(rng) {
    if (n > (std::int64_t{1} << 31)) throw std::invalid_argument("a bucket of more than 2^31 elements");
  }
  std::int64_t payload_bytes() const override { return 8 * k_; }
  void compress(at::Tensor& x, at::Tensor& payload) override {
    auto indices = payload.narrow(0, 0, 4 * k_).view(at::kInt);
    float scale = 1.0f;
    if (random_) {
      // The draws are the host's (a few bytes per element kept), copied over.
      auto drawn = at::empty({k_}, at::kInt);
      kernels::randomk_indices(n_, k_, rng_, reinterpret_cast<std::uint32_t*>(drawn.data_ptr<std::int32_t>()));
      indices.copy_(drawn);
      if (rescale_) scale = static_cast<float>(n_) / static_cast<float>(k_);
    } else {
      // The k largest |x| in ascending index order, as topk_select leaves them.
      const auto largest = std::get<1>(at::topk(x.abs(), k_, 0, /*largest=*/true, /*sorted=*/false));
      indices.copy_(std::get<0>(at::sort(largest)).to(at::kInt));
    }
    kernels::gather_scaled(kernel_device(x), x.data_ptr<float>(), words_of(payload, 0), k_, scale,
                           reinterpret_cast<float*>(payload.data_ptr<std::uint8_t>() + 4 * k_), kernel_stream(x));
  }
  void decompress_add(const at::Tensor& payload, float weight, at::Tensor& out) const override {
    if (random_ && !rescale_) {
      // Decoding assigns, as on the host: an index drawn twice counts once
      // (its values are equal, so whichever write wins is the same).
      auto decoded = at::zeros_like(out);
      decoded.index_put_({payload.narrow(0, 0, 4 * k_).view(at::kInt).to(at::kLong)},
                         payload.narrow(0, 4 * k_, 4 * k_).view(at::kFloat));
      if (weight != 1.0f) decoded.mul_(weight);  // then a plain add: no fused multiply-add
      out.add_(decoded);
      return;
    }
    kernels::scatter_add(kernel_device(out), words_of(payload, 0),
                         reinterpret_cast<const float*>(payload.data_ptr<std::uint8_t>() + 4 * k_), k_, weight,
                         out.data_ptr<float>(), kernel_stream(out));
  }
  void save(std::vector<std::uint8_t>& out) const override {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&rng_);
    out.insert(out.end(), p, p + sizeof rng_);
  }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override {
    if (pos + sizeof rng_ > in.size()) throw std::runtime_error("compressor state in the checkpoint is too short");
    std::memcpy(&rng_, in.data() + pos, sizeof rng_);
    pos += sizeof rng_;
  }

 private:
  bool random_;
  std::int64_t n_, k_;
  bool rescale_;
  kernels::Xorshift128p rng_;
};

class DeviceDecorator : public DeviceCompressor {
 public:
  explicit DeviceDecorator(std::unique_ptr<DeviceCompressor> inner) : inner_(std::move(inner)) {}
  std::int64_t payload_bytes() const override { return inner_->payload_bytes(); }
  void decompress_add(const at::Tensor& payload, float weight, at::Tensor& out) const override {
    inner_->decompress_add(payload, weight, out);
  }
  void report(std::vector<std::pair<std::string, double>>& stats) const override { inner_->report(stats); }
  void set_learning_rate(double lr) override { inner_->set_learning_rate(lr); }

 protected:
  std::unique_ptr<DeviceCompressor> inner_;
};

// A decorator with one memory per element (error, momentum), saved after the
// inner compressor's state, as the host decorators save theirs.
class DeviceMemoryDecorator : public DeviceDecorator {
 public:
  DeviceMemoryDecorator(std::unique_ptr<DeviceCompressor> inner, std::int64_t n, const at::Device& device)
      : DeviceDecorator(std::move(inner)), memory_(at::zeros({n}, at::dtype(at::kFloat).device(device))) {}
  void save(std::vector<std::uint8_t>& out) const override {
    inner_->save(out);
    append_tensor(out, memory_);
  }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override {
    inner_->load(in, pos);
    read_tensor(in, pos, memory_);
  }

 protected:
  at::Tensor memory_;
};

// Vanilla error feedback: p = g + (lr_prev / lr) e; c = C(p); e = p - D(c).
// The memory is e; the previous learning rate is saved after it, as the
// host's ErrorFeedback saves it.
class DeviceErrorFeedback final : public DeviceMemoryDecorator {
 public:
  DeviceErrorFeedback(std::unique_ptr<DeviceCompressor> inner, std::int64_t n, const at::Device& device)
      : DeviceMemoryDecorator(std::move(inner), n, device), decoded_(at::empty_like(memory_)) {}
  void set_learning_rate(double lr) override {
    ratio_ = 1.0f;
    if (!(lr > 0)) return;
    if (!(previous_lr_ > 0)) previous_lr_ = lr;
    ratio_ = static_cast<float>(previous_lr_ / lr);
    previous_lr_ = lr;
    inner_->set_learning_rate(lr);
  }
  void save(std::vector<std::uint8_t>& out) const override {
    DeviceMemoryDecorator::save(out);
    const auto* p = reinterpret_cast<const std::uint8_t*>(&previous_lr_);
    out.insert(out.end(), p, p + sizeof previous_lr_);
  }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override {
    DeviceMemoryDecorator::load(in, pos);
    if (pos + sizeof previous_lr_ > in.size()) throw std::runtime_error("compressor state in the checkpoint is too short");
    std::memcpy(&previous_lr_, in.data() + pos, sizeof previous_lr_);
    pos += sizeof previous_lr_;
  }
  void compress(at::Tensor& x, at::Tensor& payload) override {
    const auto device = kernel_device(x);
    void* stream = kernel_stream(x);
    if (ratio_ != 1.0f) memory_.mul_(ratio_);
    kernels::add_into_both(device, x.data_ptr<float>(), memory_.data_ptr<float>(), x.numel(), stream);
    inner_->compress(x, payload);
    decoded_.zero_();
    inner_->decompress_add(payload, 1.0f, decoded_);
    error_norm_ = std::sqrt(kernels::subtract_and_square_sum(device, memory_.data_ptr<float>(),
                                                             decoded_.data_ptr<float>(), x.numel(), stream));
  }
  void report(std::vector<std::pair<std::string, double>>& stats) const override {
    inner_->report(stats);
    stats.emplace_back("ef_error_norm", error_norm_);
  }

 private:
  at::Tensor decoded_;
  double error_norm_ = 0;
  double previous_lr_ = 0;
  float ratio_ = 1.0f;
};

// Nesterov momentum: m = mu m + g; p = g + mu m. The memory is m.
class DeviceNesterov final : public DeviceMemoryDecorator {
 public:
  DeviceNesterov(std::unique_ptr<DeviceCompressor> inner, std::int64_t n, float mu, const at::Device& device)
      : DeviceMemoryDecorator(std::move(inner), n, device), mu_(mu) {}
  void compress(at::Tensor& x, at::Tensor& payload) override {
    kernels::nesterov_fold(kernel_device(x), x.data_ptr<float>(), memory_.data_ptr<float>(), x.numel(), mu_,
                           kernel_stream(x));
    inner_->compress(x, payload);
  }

 private:
  float mu_;
};

}  // namespace

bool has_device_path(const std::string& type) { return type == "onebit" || type == "topk" || type == "randomk"; }

std::unique_ptr<DeviceCompressor> make_device_compressor(const CompressorOptions& o, std::int64_t n,
                                                         std::uint64_t stream, const at::Device& device) {
  check_composition(o);
  const auto& type = o.byteps_compressor_type;
  if (!has_device_path(type)) return nullptr;
  std::unique_ptr<DeviceCompressor> c;
  if (type == "onebit")
    c = std::make_unique<DeviceOneBit>(n, o.byteps_compressor_onebit_scaling, device);
  else
    c = std::make_unique<DeviceSparse>(type == "randomk", n, resolve_k(o.byteps_compressor_k, n),
                                       o.byteps_compressor_randomk_rescale, randomk_generator(o, stream));
  if (o.byteps_ef_type == "vanilla") c = std::make_unique<DeviceErrorFeedback>(std::move(c), n, device);
  if (o.byteps_momentum_type == "nesterov")
    c = std::make_unique<DeviceNesterov>(std::move(c), n, static_cast<float>(o.byteps_momentum_mu), device);
  return c;
}

}  // namespace commtune

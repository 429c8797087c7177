#include "core/engine/compress/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>


namespace commtune {

void Compressor::decompress(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                            float* out) const {
  std::fill_n(out, n, 0.0f);
  decompress_add(payload, bytes, n, weight, out);
}

Schema<CompressorOptions> CompressorOptions::schema() {
  using O = CompressorOptions;
  return Schema<O>()
      .choice("byteps_compressor_type", &O::byteps_compressor_type, compressor_registry().names(),
              "onebit: signs and one scale; topk: the k largest |x|; randomk: k random elements; dithering: k "
              "levels with stochastic rounding, entropy-coded; or a compressor a plugin adds")
      .real("byteps_compressor_k", &O::byteps_compressor_k, Range::above(0), "",
            "topk/randomk: elements kept (k >= 1) or their fraction (k < 1); dithering: levels s (an integer)")
      .flag("byteps_compressor_onebit_scaling", &O::byteps_compressor_onebit_scaling,
            "onebit: decode to +-mean|x| (true) or to +-1 (false)")
      .flag("byteps_compressor_randomk_rescale", &O::byteps_compressor_randomk_rescale,
            "randomk: multiply kept values by n/k and count every draw (an index drawn twice adds twice), "
            "which makes the estimate unbiased; not a BytePS option")
      .choice("byteps_ef_type", &O::byteps_ef_type, {"none", "vanilla"},
              "error feedback: add what the last compression lost before compressing (p = g + e; e = p - D(C(p)))")
      .choice("byteps_momentum_type", &O::byteps_momentum_type, {"none", "nesterov"},
              "Nesterov momentum before compression (m = mu m + g; p = g + mu m); set optimizer.momentum to 0 then")
      .real("byteps_momentum_mu", &O::byteps_momentum_mu, {0, 1, false, true}, "", "momentum coefficient mu")
      .integer("byteps_seed", &O::byteps_seed, {0, 4294967295.0}, "",
               "randomk: BytePS's seed, the generator state {seed, seed} on every rank and the server, so all "
               "pick the same indices; 0: each rank and the server draw their own (as BytePS without a seed). "
               "dithering: the seed of its draws")
      .choice("byteps_aggregation", &O::byteps_aggregation, {"server", "allgather"},
              "server: BytePS's algorithm - each rank pushes its compressed partitions, a server stage (run the "
              "same on every rank) decodes the pushes in rank order, sums them and compresses the sum again with "
              "its own error feedback, every rank pulls and decodes that; allgather: no server stage, every rank "
              "decodes and averages every rank's payload (not BytePS; the one with a device path and two levels)")
      .integer("byteps_partition_bytes", &O::byteps_partition_bytes, {4, 1e12}, "bytes",
               "server aggregation: each parameter's gradient is compressed in partitions of this size, each with "
               "its own memories (BYTEPS_PARTITION_BYTES)")
      .integer("byteps_dithering_partition", &O::byteps_dithering_partition, {0, 1}, "",
               "dithering levels: 0 linear {0, 1/s, .., 1}, 1 natural {0, 2^(1-s), .., 1}")
      .integer("byteps_dithering_normalize", &O::byteps_dithering_normalize, {0, 1}, "",
               "dithering norm: 0 max |x|, 1 the l2 norm")
      .integer("byteps_min_compress_bytes", &O::byteps_min_compress_bytes, Range::at_least(0), "bytes",
               "buckets smaller than this go uncompressed (plain allreduce)")
      .integer("ranks_per_node", &O::ranks_per_node, {0, 4096}, "ranks",
               "two-level compression: groups of this many consecutive ranks (a node) sum in fp16 first, then "
               "only each node's first rank exchanges compressed payloads, and broadcasts the result in its node "
               "(0: one level)")
      .choice("byteps_compress_on", &O::byteps_compress_on, {"auto", "host", "device"},
              "where a bucket is compressed and decoded: auto (on the bucket's device: a GPU bucket on its GPU, "
              "no copy to the host), host (copied to the host first), device (the device path also for a CPU "
              "bucket); dithering and plugins' compressors always run on the host");
}

std::int64_t resolve_k(double k, std::int64_t n) {
  // BytePS (impl/topk.cc, randomk.cc): k = unsigned(factor * size / 4) in
  // float, size the partition's bytes padded by Align (common.h) to 128.
  const auto factor = static_cast<float>(k);
  const std::int64_t bytes = 4 * n, aligned = bytes + (128 - bytes % 128) % 128;
  const auto count = factor < 1 ? static_cast<std::int64_t>(factor * static_cast<float>(aligned) / 4.0f)
                                : static_cast<std::int64_t>(factor);
  return std::clamp<std::int64_t>(count, 1, std::max<std::int64_t>(n, 1));
}

namespace {

template <class T>
void append_bytes(std::vector<std::uint8_t>& out, const T* data, std::size_t count) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + count * sizeof(T));
}

template <class T>
void read_bytes(const std::vector<std::uint8_t>& in, std::size_t& pos, T* data, std::size_t count) {
  const auto bytes = count * sizeof(T);
  if (pos + bytes > in.size()) throw std::runtime_error("compressor state in the checkpoint is too short");
  std::memcpy(data, in.data() + pos, bytes);
  pos += bytes;
}

class OneBit final : public Compressor {
 public:
  // sequential_scale: BytePS's sum of |x| in one double, element by element
  // (impl/onebit.cc), for its exact bits; otherwise the vectorised sum that
  // the device path reproduces (within an ulp of it).
  OneBit(bool scaled, bool sequential_scale) : scaled_(scaled), sequential_scale_(sequential_scale) {}
  std::size_t max_payload_bytes(std::int64_t n) const override {
    return 4 + 4 * static_cast<std::size_t>((n + 31) / 32);
  }
  std::size_t compress(float* x, std::int64_t n, std::uint8_t* payload) override {
    auto* words = reinterpret_cast<std::uint32_t*>(payload + 4);
    float scale = kernels::onebit_pack(x, n, scaled_, words);
    if (scaled_ && sequential_scale_ && n > 0) {
      double sum = 0;
      for (std::int64_t i = 0; i < n; ++i) sum += std::abs(x[i]);
      scale = static_cast<float>(sum / static_cast<double>(n));
    }
    std::memcpy(payload, &scale, 4);
    return max_payload_bytes(n);
  }
  void decompress_add(const std::uint8_t* payload, std::size_t, std::int64_t n, float weight,
                      float* out) const override {
    unpack(payload, n, weight, out, kernels::onebit_unpack_add);
  }
  void decompress(const std::uint8_t* payload, std::size_t, std::int64_t n, float weight, float* out) const override {
    unpack(payload, n, weight, out, kernels::onebit_unpack);
  }

 private:
  using Unpack = void (*)(const std::uint32_t*, std::int64_t, float, float, float*);
  static void unpack(const std::uint8_t* payload, std::int64_t n, float weight, float* out, Unpack kernel) {
    float scale = 0;
    std::memcpy(&scale, payload, 4);
    kernel(reinterpret_cast<const std::uint32_t*>(payload + 4), n, scale, weight, out);
  }

  bool scaled_, sequential_scale_;
};

// topk and randomk: k (u32 index, f32 value) pairs, indices first. Decoding
// assigns, as BytePS does: where randomk drew an index twice, the element is
// its value once (and error feedback's error there is zero). Rescaled
// randomk (commtune's, not BytePS's) counts every draw instead, which is
// what makes n/k times the sum unbiased.
class Sparse final : public Compressor {
 public:
  Sparse(bool random, std::int64_t k, bool rescale, kernels::Xorshift128p rng)
      : random_(random), k_(k), rescale_(rescale), rng_(rng) {}
  std::size_t max_payload_bytes(std::int64_t) const override { return 8 * static_cast<std::size_t>(k_); }
  std::size_t compress(float* x, std::int64_t n, std::uint8_t* payload) override {
    auto* indices = reinterpret_cast<std::uint32_t*>(payload);
    auto* values = reinterpret_cast<float*>(payload + 4 * k_);
    if (random_)
      kernels::randomk_select(x, n, k_, rescale_ ? static_cast<float>(n) / static_cast<float>(k_) : 1.0f, rng_, indices,
                              values);
    else
      kernels::topk_select(x, n, k_, indices, values);
    return max_payload_bytes(n);
  }
  void decompress_add(const std::uint8_t* payload, std::size_t, std::int64_t n, float weight,
                      float* out) const override {
    const auto* indices = reinterpret_cast<const std::uint32_t*>(payload);
    const auto* values = reinterpret_cast<const float*>(payload + 4 * k_);
    if (!random_ || rescale_) return kernels::scatter_add(indices, values, k_, weight, out);
    // Each drawn index once: decoded into a scratch vector that is all zero
    // between calls, added, and cleared where it was written.
    if (static_cast<std::int64_t>(scratch_.size()) < n) scratch_.assign(static_cast<std::size_t>(n), 0.0f);
    for (std::int64_t j = 0; j < k_; ++j) scratch_[indices[j]] = values[j];
    for (std::int64_t j = 0; j < k_; ++j) {
      out[indices[j]] += scratch_[indices[j]] * weight;
      scratch_[indices[j]] = 0.0f;
    }
  }
  void decompress(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                  float* out) const override {
    if (!random_ || rescale_) return Compressor::decompress(payload, bytes, n, weight, out);
    const auto* indices = reinterpret_cast<const std::uint32_t*>(payload);
    const auto* values = reinterpret_cast<const float*>(payload + 4 * k_);
    std::fill_n(out, n, 0.0f);
    for (std::int64_t j = 0; j < k_; ++j) out[indices[j]] = values[j] * weight;
  }
  void save(std::vector<std::uint8_t>& out) const override { append_bytes(out, &rng_, 1); }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override { read_bytes(in, pos, &rng_, 1); }

 private:
  bool random_;
  std::int64_t k_;
  bool rescale_;
  kernels::Xorshift128p rng_;
  mutable std::vector<float> scratch_;
};

class Dithering final : public Compressor {
 public:
  Dithering(kernels::DitheringOptions options, std::uint64_t seed)
      : options_(options), rng_(kernels::Xorshift128p::seeded(seed)) {}
  bool fixed_size() const override { return false; }
  std::size_t max_payload_bytes(std::int64_t n) const override { return kernels::dithering_max_bytes(n, options_); }
  std::size_t compress(float* x, std::int64_t n, std::uint8_t* payload) override {
    return kernels::dithering_encode(x, n, options_, rng_, payload);
  }
  void decompress_add(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                      float* out) const override {
    kernels::dithering_decode_add(payload, bytes, n, options_, weight, out);
  }
  void decompress(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                  float* out) const override {
    kernels::dithering_decode(payload, bytes, n, options_, weight, out);
  }
  void save(std::vector<std::uint8_t>& out) const override { append_bytes(out, &rng_, 1); }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override { read_bytes(in, pos, &rng_, 1); }

 private:
  kernels::DitheringOptions options_;
  kernels::Xorshift128p rng_;
};

// A decorator forwards everything to the compressor it wraps.
class Decorator : public Compressor {
 public:
  explicit Decorator(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {}
  std::size_t max_payload_bytes(std::int64_t n) const override { return inner_->max_payload_bytes(n); }
  bool fixed_size() const override { return inner_->fixed_size(); }
  void decompress_add(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                      float* out) const override {
    inner_->decompress_add(payload, bytes, n, weight, out);
  }
  void decompress(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                  float* out) const override {
    inner_->decompress(payload, bytes, n, weight, out);
  }
  void report(std::vector<std::pair<std::string, double>>& stats) const override { inner_->report(stats); }
  void set_learning_rate(double lr) override { inner_->set_learning_rate(lr); }
  void save(std::vector<std::uint8_t>& out) const override { inner_->save(out); }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override { inner_->load(in, pos); }

 protected:
  std::unique_ptr<Compressor> inner_;
};

// Vanilla error feedback: p = g + (lr_prev / lr) e; c = C(p); e = p - D(c)
// (BytePS's impl/vanilla_error_feedback.cc: the error is what the last step
// did not apply at its learning rate, rescaled to this step's).
class ErrorFeedback final : public Decorator {
 public:
  ErrorFeedback(std::unique_ptr<Compressor> inner, std::int64_t n)
      : Decorator(std::move(inner)), error_(static_cast<std::size_t>(n), 0.0f), decoded_(error_.size()) {}
  void set_learning_rate(double lr) override {
    ratio_ = 1.0f;
    if (!(lr > 0)) return;  // no schedule known: the error as it is
    if (!(previous_lr_ > 0)) previous_lr_ = lr;  // the first step: ratio 1, as BytePS starts pre = cur
    ratio_ = static_cast<float>(previous_lr_ / lr);
    previous_lr_ = lr;
    inner_->set_learning_rate(lr);
  }
  std::size_t compress(float* x, std::int64_t n, std::uint8_t* payload) override {
    // e * ratio rounds as BytePS's x + ratio * e does; ratio 1 changes no bit.
    if (ratio_ != 1.0f)
      for (std::int64_t i = 0; i < n; ++i) error_[i] *= ratio_;
    // PowerSGD's error-feedback kernels: x = e = g + e, then e -= D(C(x)).
    kernels::add_into_both(kernels::Device::Cpu, x, error_.data(), n);
    const auto bytes = inner_->compress(x, n, payload);
    inner_->decompress(payload, bytes, n, 1.0f, decoded_.data());
    error_norm_ = std::sqrt(kernels::subtract_and_square_sum(kernels::Device::Cpu, error_.data(), decoded_.data(), n));
    return bytes;
  }
  void report(std::vector<std::pair<std::string, double>>& stats) const override {
    inner_->report(stats);
    stats.emplace_back("ef_error_norm", error_norm_);
  }
  void save(std::vector<std::uint8_t>& out) const override {
    inner_->save(out);
    append_bytes(out, error_.data(), error_.size());
    append_bytes(out, &previous_lr_, 1);
  }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override {
    inner_->load(in, pos);
    read_bytes(in, pos, error_.data(), error_.size());
    read_bytes(in, pos, &previous_lr_, 1);
  }

 private:
  std::vector<float> error_;
  double previous_lr_ = 0;  // 0: no step yet
  float ratio_ = 1.0f;
  // Where the payload is decoded each step: allocated once, not per step
  // (a large bucket's buffer would be mapped and faulted in every time).
  std::vector<float> decoded_;
  double error_norm_ = 0;
};

// Nesterov momentum: m = mu m + g; p = g + mu m.
class NesterovMomentum final : public Decorator {
 public:
  NesterovMomentum(std::unique_ptr<Compressor> inner, std::int64_t n, float mu)
      : Decorator(std::move(inner)), momentum_(static_cast<std::size_t>(n), 0.0f), mu_(mu) {}
  std::size_t compress(float* x, std::int64_t n, std::uint8_t* payload) override {
    kernels::nesterov_fold(kernels::Device::Cpu, x, momentum_.data(), n, mu_);
    return inner_->compress(x, n, payload);
  }
  void save(std::vector<std::uint8_t>& out) const override {
    inner_->save(out);
    append_bytes(out, momentum_.data(), momentum_.size());
  }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override {
    inner_->load(in, pos);
    read_bytes(in, pos, momentum_.data(), momentum_.size());
  }

 private:
  std::vector<float> momentum_;
  float mu_;
};

}  // namespace

void CompressorRegistry::add(std::string name, std::string doc, Make make) {
  if (find(name)) throw std::logic_error("compressor '" + name + "' is registered twice");
  entries_.push_back({std::move(name), std::move(doc), std::move(make)});
}

const CompressorRegistry::Entry* CompressorRegistry::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> CompressorRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

CompressorRegistry& compressor_registry() {
  static CompressorRegistry registry = [] {
    CompressorRegistry r;
    r.add("onebit", "signs and one scale", [](const CompressorOptions& o, std::int64_t, std::uint64_t) {
      return std::make_unique<OneBit>(o.byteps_compressor_onebit_scaling, o.byteps_aggregation == "server");
    });
    for (const bool random : {false, true})
      r.add(random ? "randomk" : "topk", random ? "k random elements" : "the k largest |x|",
            [random](const CompressorOptions& o, std::int64_t n, std::uint64_t seed) {
              const auto rng = o.byteps_seed != 0
                                   ? kernels::Xorshift128p::bytepss(static_cast<std::uint64_t>(o.byteps_seed))
                                   : kernels::Xorshift128p::seeded(seed);
              return std::make_unique<Sparse>(random, resolve_k(o.byteps_compressor_k, n),
                                              o.byteps_compressor_randomk_rescale, rng);
            });
    r.add("dithering", "k levels, stochastic rounding, entropy-coded",
          [](const CompressorOptions& o, std::int64_t, std::uint64_t seed) {
            if (o.byteps_compressor_k < 1 || o.byteps_compressor_k != std::floor(o.byteps_compressor_k) ||
                o.byteps_compressor_k > 31)
              throw ConfigError(
                  "hook.byteps_compressor_k",
                  "dithering takes a whole number of levels in [1, 31], got " + std::to_string(o.byteps_compressor_k));
            kernels::DitheringOptions d;
            d.levels = static_cast<std::int64_t>(o.byteps_compressor_k);
            d.natural = o.byteps_dithering_partition == 1;
            d.l2_norm = o.byteps_dithering_normalize == 1;
            return std::make_unique<Dithering>(d, seed);
          });
    return r;
  }();
  return registry;
}

std::uint64_t compressor_seed(const CompressorOptions& o, std::uint64_t stream) {
  return static_cast<std::uint64_t>(o.byteps_seed) * 0x100000001b3ull + stream;
}

kernels::Xorshift128p randomk_generator(const CompressorOptions& o, std::uint64_t stream) {
  return o.byteps_seed != 0 ? kernels::Xorshift128p::bytepss(static_cast<std::uint64_t>(o.byteps_seed))
                            : kernels::Xorshift128p::seeded(compressor_seed(o, stream));
}

void check_composition(const CompressorOptions& o) {
  const auto& type = o.byteps_compressor_type;
  if (!compressor_registry().find(type))
    throw ConfigError("hook.byteps_compressor_type", "unknown compressor '" + type + "'");
  if (o.byteps_ef_type == "vanilla" && type == "randomk" && o.byteps_compressor_randomk_rescale)
    throw ConfigError("hook.byteps_compressor_randomk_rescale",
                      "cannot go with error feedback (byteps_ef_type=vanilla): error feedback needs a compressor "
                      "that shrinks its input, and rescaled randomk multiplies the kept elements by n/k, so the "
                      "error would grow every step. Turn one of them off");
}

std::unique_ptr<Compressor> make_compressor(const CompressorOptions& o, std::int64_t n, std::uint64_t stream) {
  check_composition(o);
  std::unique_ptr<Compressor> c = compressor_registry().find(o.byteps_compressor_type)->make(o, n, compressor_seed(o, stream));
  if (o.byteps_ef_type == "vanilla") c = std::make_unique<ErrorFeedback>(std::move(c), n);
  if (o.byteps_momentum_type == "nesterov")
    c = std::make_unique<NesterovMomentum>(std::move(c), n, static_cast<float>(o.byteps_momentum_mu));
  return c;
}

}  // namespace commtune

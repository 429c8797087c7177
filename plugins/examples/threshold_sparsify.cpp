// Example plugin: a threshold-sparsification hook and the TernGrad
// compressor.
//
// threshold_sparsify: gradient elements whose magnitude is below `threshold`
// are dropped (set to zero) before the average; the bucket then goes through
// an ordinary allreduce. (A production version would send only the kept
// elements; this one shows the SDK.) tests/integration/test_plugins.py
// checks it against the same arithmetic in PyTorch.
//
// terngrad (Wen et al., 2017), for hook.name=byteps: each element becomes
// s * sign(x) with probability |x|/s, else 0, where s = max|x| — unbiased,
// 2 bits per element plus the scale on the wire.
#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "plugins/commtune_plugin.h"

namespace {

struct ThresholdOptions {
  double threshold = 1e-3;
  static commtune::Schema<ThresholdOptions> schema() {
    return commtune::Schema<ThresholdOptions>().real("threshold", &ThresholdOptions::threshold,
                                                     commtune::Range::at_least(0), "",
                                                     "gradient elements with |g| below this are dropped");
  }
};

class ThresholdHook final : public commtune::CommHook {
 public:
  ThresholdHook(double threshold, commtune::HookEnv& env) : threshold_(threshold), env_(env) {}
  commtune::Future run(commtune::GradBucket& bucket) override {
    auto buffer = bucket.buffer();
    const auto dropped = buffer.abs() < threshold_;
    env_.stats.set_bucket(bucket.index(), "kept_fraction", 1.0 - dropped.to(at::kDouble).mean().item<double>());
    buffer.masked_fill_(dropped, 0).div_(env_.world_size());
    return env_.comm.allreduce_sum(buffer);
  }

 private:
  double threshold_;
  commtune::HookEnv& env_;
};

class TernGrad final : public commtune::Compressor {
 public:
  explicit TernGrad(std::uint64_t seed) : random_(seed) {}
  std::size_t max_payload_bytes(std::int64_t n) const override { return sizeof(float) + (n + 3) / 4; }
  std::size_t compress(float* x, std::int64_t n, std::uint8_t* payload) override {
    float scale = 0;
    for (std::int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(x[i]));
    std::memcpy(payload, &scale, sizeof scale);
    auto* codes = payload + sizeof scale;
    std::memset(codes, 0, (n + 3) / 4);
    std::uniform_real_distribution<float> uniform(0.f, 1.f);
    for (std::int64_t i = 0; i < n && scale > 0; ++i)
      if (uniform(random_) < std::fabs(x[i]) / scale)  // code 1: +scale, 2: -scale, 0: zero
        codes[i / 4] |= static_cast<std::uint8_t>((x[i] > 0 ? 1 : 2) << (2 * (i % 4)));
    return max_payload_bytes(n);
  }
  void decompress_add(const std::uint8_t* payload, std::size_t, std::int64_t n, float weight,
                      float* out) const override {
    float scale;
    std::memcpy(&scale, payload, sizeof scale);
    const auto* codes = payload + sizeof scale;
    for (std::int64_t i = 0; i < n; ++i) {
      const int code = (codes[i / 4] >> (2 * (i % 4))) & 3;
      if (code) out[i] += weight * (code == 1 ? scale : -scale);
    }
  }
  void save(std::vector<std::uint8_t>& out) const override {
    std::ostringstream state;
    state << random_;
    const auto text = state.str();
    const auto size = static_cast<std::uint32_t>(text.size());
    out.insert(out.end(), reinterpret_cast<const std::uint8_t*>(&size),
               reinterpret_cast<const std::uint8_t*>(&size + 1));
    out.insert(out.end(), text.begin(), text.end());
  }
  void load(const std::vector<std::uint8_t>& in, std::size_t& pos) override {
    std::uint32_t size;
    std::memcpy(&size, in.data() + pos, sizeof size);
    pos += sizeof size;
    std::istringstream(std::string(in.begin() + static_cast<std::ptrdiff_t>(pos),
                                   in.begin() + static_cast<std::ptrdiff_t>(pos + size))) >>
        random_;
    pos += size;
  }

 private:
  std::mt19937_64 random_;
};

void register_examples(commtune::Catalog& catalog) {
  catalog.compressors.add("terngrad", "example plugin: TernGrad, s*sign(x) kept with probability |x|/s",
                          [](const commtune::CompressorOptions&, std::int64_t, std::uint64_t seed) {
                            return std::make_unique<TernGrad>(seed);
                          });
  catalog.hooks.add<ThresholdOptions>("threshold_sparsify",
                                      "example plugin: drop gradient elements below a threshold, then average",
                                      [](const ThresholdOptions& o, commtune::HookEnv& env) {
                                        return std::make_unique<ThresholdHook>(o.threshold, env);
                                      });
}

}  // namespace

COMMTUNE_PLUGIN("threshold-sparsify and terngrad examples", register_examples)

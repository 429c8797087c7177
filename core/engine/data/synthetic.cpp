// Deterministic synthetic tasks, generated from the run's seed with a CPU
// generator. tests/oracle/commtune_reference.py draws the same tensors with
// the same calls in Python, which is what lets PyTorch replay a run.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "core/engine/data/builtin_datasets.h"

namespace commtune {

namespace {

struct ClassificationOptions {
  std::int64_t samples = 8192;
  std::int64_t features = 256;
  std::int64_t classes = 10;
  static Schema<ClassificationOptions> schema() {
    return Schema<ClassificationOptions>()
        .integer("samples", &ClassificationOptions::samples, {1, 1 << 26}, "samples", "dataset size")
        .integer("features", &ClassificationOptions::features, {1, 1 << 20}, "", "input features per sample")
        .integer("classes", &ClassificationOptions::classes, {2, 1 << 16}, "", "number of classes");
  }
};

struct ImageOptions {
  std::int64_t samples = 4096;
  std::int64_t channels = 3;
  std::int64_t size = 16;
  std::int64_t classes = 10;
  static Schema<ImageOptions> schema() {
    return Schema<ImageOptions>()
        .integer("samples", &ImageOptions::samples, {1, 1 << 24}, "samples", "dataset size")
        .integer("channels", &ImageOptions::channels, {1, 64}, "", "image channels")
        .integer("size", &ImageOptions::size, {4, 512}, "pixels", "image height and width (a multiple of 4)")
        .integer("classes", &ImageOptions::classes, {2, 1 << 16}, "", "number of classes");
  }
};

struct TokenOptions {
  std::int64_t samples = 2048;
  std::int64_t seq_len = 32;
  std::int64_t vocab = 64;
  static Schema<TokenOptions> schema() {
    return Schema<TokenOptions>()
        .integer("samples", &TokenOptions::samples, {1, 1 << 24}, "sequences", "dataset size")
        .integer("seq_len", &TokenOptions::seq_len, {2, 4096}, "tokens", "sequence length")
        .integer("vocab", &TokenOptions::vocab, {2, 1 << 16}, "tokens", "vocabulary size");
  }
};

at::Generator generator_for(const DataContext& ctx) {
  return at::detail::createCPUGenerator(static_cast<std::uint64_t>(ctx.seed));
}

// Labels from a random linear teacher: learnable, and hard enough to take many steps.
std::unique_ptr<Dataset> make_classification(const ClassificationOptions& o, const DataContext& ctx) {
  auto gen = generator_for(ctx);
  auto inputs = at::randn({o.samples, o.features}, gen);
  auto teacher = at::randn({o.features, o.classes}, gen);
  auto targets = inputs.matmul(teacher).argmax(1);
  return std::make_unique<TensorDataset>(inputs, targets,
                                         DataSpec{{o.features}, false, o.classes, Task::Classification});
}

std::unique_ptr<Dataset> make_images(const ImageOptions& o, const DataContext& ctx) {
  if (o.size % 4 != 0) throw ConfigError("data.size", std::to_string(o.size) + " is not a multiple of 4");
  auto gen = generator_for(ctx);
  auto inputs = at::randn({o.samples, o.channels, o.size, o.size}, gen);
  const auto pooled = o.channels * (o.size / 4) * (o.size / 4);
  auto teacher = at::randn({pooled, o.classes}, gen);
  auto targets = at::avg_pool2d(inputs, {4, 4}).flatten(1).matmul(teacher).argmax(1);
  return std::make_unique<TensorDataset>(
      inputs, targets, DataSpec{{o.channels, o.size, o.size}, false, o.classes, Task::Classification});
}

// Sequences from a random Markov chain with peaked transitions: a language
// model can learn the transition table.
std::unique_ptr<Dataset> make_tokens(const TokenOptions& o, const DataContext& ctx) {
  auto gen = generator_for(ctx);
  auto transition = at::softmax(at::randn({o.vocab, o.vocab}, gen).mul_(3.0), 1);
  auto tokens = at::empty({o.samples, o.seq_len + 1}, at::TensorOptions().dtype(at::kLong));
  auto current = at::randint(o.vocab, {o.samples}, gen, at::TensorOptions().dtype(at::kLong));
  tokens.select(1, 0).copy_(current);
  for (std::int64_t t = 1; t <= o.seq_len; ++t) {
    current = at::multinomial(transition.index_select(0, current), 1, /*replacement=*/true, gen).squeeze(1);
    tokens.select(1, t).copy_(current);
  }
  auto inputs = tokens.narrow(1, 0, o.seq_len).contiguous();
  auto targets = tokens.narrow(1, 1, o.seq_len).contiguous();
  return std::make_unique<TensorDataset>(inputs, targets, DataSpec{{o.seq_len}, true, o.vocab, Task::LanguageModel});
}

}  // namespace

void register_synthetic_datasets(DatasetRegistry& registry) {
  registry.add<ClassificationOptions>("synthetic", "Gaussian feature vectors labelled by a random linear teacher",
                                      make_classification);
  registry.add<ImageOptions>("synthetic_images",
                             "Gaussian images labelled by a random linear teacher on 4x4-pooled pixels", make_images);
  registry.add<TokenOptions>("synthetic_tokens", "token sequences from a random Markov chain (next-token prediction)",
                             make_tokens);
}

}  // namespace commtune

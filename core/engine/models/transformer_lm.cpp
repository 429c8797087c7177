// A small decoder-only transformer language model (pre-norm, causal attention):
//   x = tok_emb(ids) + pos_emb; per block: x += proj(attn(ln1(x))); x += fc2(gelu(fc1(ln2(x))))
//   logits = head(ln_f(x))
#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>

#include "core/engine/models/bucket_linear.h"
#include "core/engine/models/builtin_models.h"
#include "core/engine/models/torch_module_model.h"

namespace commtune {

namespace {

struct TransformerOptions {
  std::int64_t d_model = 64;
  std::int64_t heads = 4;
  std::int64_t layers = 2;
  std::int64_t mlp_ratio = 4;
  static Schema<TransformerOptions> schema() {
    return Schema<TransformerOptions>()
        .integer("d_model", &TransformerOptions::d_model, {8, 8192}, "", "embedding width (a multiple of heads)")
        .integer("heads", &TransformerOptions::heads, {1, 128}, "", "attention heads")
        .integer("layers", &TransformerOptions::layers, {1, 96}, "", "transformer blocks")
        .integer("mlp_ratio", &TransformerOptions::mlp_ratio, {1, 16}, "", "MLP width as a multiple of d_model");
  }
};

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const TransformerOptions& o) : heads_(o.heads) {
    const auto d = o.d_model;
    ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    qkv_ = register_module("qkv", BucketLinear(d, 3 * d));
    proj_ = register_module("proj", BucketLinear(d, d));
    ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    fc1_ = register_module("fc1", BucketLinear(d, o.mlp_ratio * d));
    fc2_ = register_module("fc2", BucketLinear(o.mlp_ratio * d, d));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& causal_mask) {
    const auto batch = x.size(0), time = x.size(1), d = x.size(2), head_dim = d / heads_;
    auto qkv = qkv_->forward(ln1_->forward(x)).view({batch, time, 3, heads_, head_dim}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0], k = qkv[1], v = qkv[2];
    auto scores = at::matmul(q, k.transpose(-2, -1)).mul(1.0 / std::sqrt(static_cast<double>(head_dim)));
    auto attention = at::softmax(scores.masked_fill(causal_mask, -INFINITY), -1);
    auto y = at::matmul(attention, v).transpose(1, 2).reshape({batch, time, d});
    auto h = x + proj_->forward(y);
    return h + fc2_->forward(at::gelu(fc1_->forward(ln2_->forward(h))));
  }

 private:
  std::int64_t heads_;
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  BucketLinear qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Block);

class TransformerLmImpl : public torch::nn::Module {
 public:
  TransformerLmImpl(const DataSpec& spec, const TransformerOptions& o) {
    const auto vocab = spec.num_classes, seq_len = spec.input_shape[0];
    tok_emb_ = register_module("tok_emb", torch::nn::Embedding(vocab, o.d_model));
    pos_emb_ = register_parameter("pos_emb", at::randn({seq_len, o.d_model}).mul_(0.02));
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < o.layers; ++i) blocks_->push_back(Block(o));
    ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model})));
    head_ = register_module("head", BucketLinear(o.d_model, vocab));
  }
  at::Tensor forward(const at::Tensor& ids) {
    const auto time = ids.size(1);
    auto mask = at::ones({time, time}, at::TensorOptions().dtype(at::kBool).device(ids.device())).triu(1);
    auto x = tok_emb_->forward(ids) + pos_emb_.narrow(0, 0, time);
    for (const auto& block : *blocks_) x = block->as<Block>()->forward(x, mask);
    return head_->forward(ln_f_->forward(x));
  }

 private:
  torch::nn::Embedding tok_emb_{nullptr};
  at::Tensor pos_emb_;
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
  BucketLinear head_{nullptr};
};
TORCH_MODULE(TransformerLm);

}  // namespace

void register_transformer_lm(ModelRegistry& registry) {
  registry.add<TransformerOptions>(
      "transformer_lm", "decoder-only transformer language model (pre-norm, causal self-attention, GELU MLP)",
      [](const TransformerOptions& o, const DataSpec& spec) {
        require_task("transformer_lm", spec, Task::LanguageModel, true);
        if (o.d_model % o.heads != 0)
          throw ConfigError("model.d_model", std::to_string(o.d_model) + " is not a multiple of model.heads (" +
                                                 std::to_string(o.heads) + ")");
        return wrap_module(TransformerLm(spec, o));
      });
}

}  // namespace commtune

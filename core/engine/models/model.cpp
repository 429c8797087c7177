#include "core/engine/models/model.h"

#include <ATen/ATen.h>

#include "core/engine/models/builtin_models.h"
#include "core/engine/models/torch_module_model.h"

namespace commtune {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target) {
  if (logits.dim() == 3) return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
  return at::cross_entropy_loss(logits, target);
}

void check_logits(const at::Tensor& logits, const at::Tensor& target) {
  const auto shape = [](const at::Tensor& t) {
    std::string text = "[";
    for (std::int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.size(d));
    return text + "]";
  };
  const bool fits = (logits.dim() == 2 && target.dim() == 1) || (logits.dim() == 3 && target.dim() == 2);
  if (!fits || logits.size(0) != target.size(0) || (logits.dim() == 3 && logits.size(1) != target.size(1)) ||
      logits.size(-1) < 1)
    throw ConfigError("model", "the model's forward returned a tensor of shape " + shape(logits) +
                                   " for targets of shape " + shape(target) +
                                   ": it must return logits [batch, classes] (or [batch, time, vocab])");
  const auto most = target.numel() ? target.max().item<std::int64_t>() : 0;
  if (most >= logits.size(-1) || (target.numel() && target.min().item<std::int64_t>() < 0))
    throw ConfigError("model", "the model gives " + std::to_string(logits.size(-1)) +
                                   " classes, but the data has label " + std::to_string(most) +
                                   ": match the model's outputs to the dataset's classes");
}

void require_task(const std::string& model, const DataSpec& spec, Task task, bool token_inputs) {
  if (spec.task == task && spec.token_inputs == token_inputs) return;
  const std::string wanted = task == Task::LanguageModel ? "a token-sequence dataset (e.g. synthetic_tokens)"
                                                         : "a classification dataset with float inputs";
  throw ConfigError("model.name", "model '" + model + "' needs " + wanted + "; the dataset gives " + spec.describe());
}

void register_builtin_models(ModelRegistry& registry) {
  register_mlp(registry);
  register_cnn(registry);
  register_transformer_lm(registry);
  register_torchscript_model(registry);
}

}  // namespace commtune

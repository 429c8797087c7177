#include "core/models/model.h"

#include <ATen/ATen.h>

#include "core/models/builtin_models.h"
#include "core/models/torch_module_model.h"

namespace commtune {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target) {
  if (logits.dim() == 3) return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
  return at::cross_entropy_loss(logits, target);
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

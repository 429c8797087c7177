// Adapts a torch::nn module holder (MLP, CNN, ...) to the Model interface.
// Include only from model .cpp files: it pulls in torch::nn.
#pragma once

#include <torch/nn/module.h>

#include "core/engine/models/model.h"

namespace commtune {

template <class Holder>
class TorchModuleModel final : public Model {
 public:
  explicit TorchModuleModel(Holder module) : module_(std::move(module)) {}
  at::Tensor forward(const at::Tensor& input) override { return module_->forward(input); }
  NamedTensors named_parameters() override {
    NamedTensors out;
    for (const auto& item : module_->named_parameters())
      if (item.value().requires_grad()) out.emplace_back(item.key(), item.value());
    return out;
  }
  NamedTensors named_buffers() override {
    NamedTensors out;
    for (const auto& item : module_->named_buffers()) out.emplace_back(item.key(), item.value());
    return out;
  }
  void to(const c10::Device& device) override { module_->to(device); }
  void train(bool on) override { module_->train(on); }

 private:
  Holder module_;
};

template <class Holder>
std::unique_ptr<Model> wrap_module(Holder module) {
  return std::make_unique<TorchModuleModel<Holder>>(std::move(module));
}

// Throws a ConfigError when the dataset does not fit the model.
void require_task(const std::string& model, const DataSpec& spec, Task task, bool token_inputs);

}  // namespace commtune

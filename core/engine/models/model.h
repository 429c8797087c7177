// A trainable model: forward, its parameters and buffers by name. Built-ins
// are torch::nn modules; a user's TorchScript file is a model too.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/engine/data/dataset.h"
#include "core/engine/ddp/flat_parameters.h"
#include "core/engine/component_registry.h"

namespace commtune {

class Model {
 public:
  virtual ~Model() = default;
  // Logits: [batch, classes], or [batch, time, vocab] for language models.
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // Trainable parameters, in the order PyTorch's named_parameters() lists them.
  virtual NamedTensors named_parameters() = 0;
  virtual NamedTensors named_buffers() = 0;
  virtual void to(const c10::Device& device) = 0;
  virtual void train(bool on) = 0;
};

// Mean cross-entropy; sequence outputs are flattened over batch and time.
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target);

// Throws ConfigError (model) unless `logits` fit `target`: [batch, classes]
// or [batch, time, vocab] for a target [batch] or [batch, time], with every
// label below the class count. Checked on a run's first batch, where a model
// from a file or a dataset from a file can disagree.
void check_logits(const at::Tensor& logits, const at::Tensor& target);

using ModelRegistry = ComponentRegistry<Model, const DataSpec&>;

void register_builtin_models(ModelRegistry& registry);

}  // namespace commtune

#include "core/engine/data/dataset.h"

#include <ATen/ATen.h>

namespace commtune {

std::string DataSpec::describe() const {
  std::string shape = "[";
  for (std::size_t i = 0; i < input_shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(input_shape[i]);
  shape += "]";
  if (task == Task::LanguageModel)
    return "token sequences of length " + shape + " over a vocabulary of " + std::to_string(num_classes);
  return std::string(token_inputs ? "token inputs " : "inputs ") + shape + " in " + std::to_string(num_classes) +
         " classes";
}

TensorDataset::TensorDataset(at::Tensor inputs, at::Tensor targets, DataSpec spec)
    : inputs_(std::move(inputs)), targets_(std::move(targets)), spec_(std::move(spec)) {
  if (inputs_.size(0) != targets_.size(0)) throw std::invalid_argument("dataset inputs and targets differ in length");
}

std::int64_t TensorDataset::size() const { return inputs_.size(0); }

Batch TensorDataset::gather(const std::vector<std::int64_t>& indices) const {
  const auto index = at::tensor(indices, at::TensorOptions().dtype(at::kLong));
  return {inputs_.index_select(0, index), targets_.index_select(0, index)};
}

}  // namespace commtune

#include "core/engine/data/builtin_datasets.h"

namespace commtune {

void register_builtin_datasets(DatasetRegistry& registry) {
  register_synthetic_datasets(registry);
  register_mnist_dataset(registry);
  register_cifar10_dataset(registry);
  register_tensor_dataset(registry);
}

}  // namespace commtune

// Datasets: whole tasks held in memory as tensors, each described by a
// DataSpec that models adapt to. Sharding and batching live in data_loader.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/engine/component_registry.h"

namespace commtune {

enum class Task { Classification, LanguageModel };

struct DataSpec {
  std::vector<std::int64_t> input_shape;  // one sample, without the batch dimension
  bool token_inputs = false;              // int64 token ids rather than float features
  std::int64_t num_classes = 0;           // classes, or the vocabulary size for language models
  Task task = Task::Classification;

  std::string describe() const;
};

struct Batch {
  at::Tensor input;
  at::Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  virtual DataSpec spec() const = 0;
  // The samples at `indices`, stacked along a new first dimension.
  virtual Batch gather(const std::vector<std::int64_t>& indices) const = 0;
};

// A dataset of two tensors indexed along their first dimension.
class TensorDataset final : public Dataset {
 public:
  TensorDataset(at::Tensor inputs, at::Tensor targets, DataSpec spec);
  std::int64_t size() const override;
  DataSpec spec() const override { return spec_; }
  Batch gather(const std::vector<std::int64_t>& indices) const override;

 private:
  at::Tensor inputs_;
  at::Tensor targets_;
  DataSpec spec_;
};

struct DataContext {
  std::int64_t seed = 0;  // the run's seed: synthetic tasks are generated from it
};

using DatasetRegistry = ComponentRegistry<Dataset, const DataContext&>;

void register_builtin_datasets(DatasetRegistry& registry);

}  // namespace commtune

// Registration of the datasets that ship with commtune, one function per file.
#pragma once

#include "core/engine/data/dataset.h"

namespace commtune {
void register_synthetic_datasets(DatasetRegistry& registry);
void register_mnist_dataset(DatasetRegistry& registry);
void register_cifar10_dataset(DatasetRegistry& registry);
void register_tensor_dataset(DatasetRegistry& registry);
}  // namespace commtune

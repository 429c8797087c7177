// MNIST in its idx format (train-images-idx3-ubyte, ...), optionally gzipped.
#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>

#include "core/engine/data/builtin_datasets.h"
#include "core/engine/data/file_reader.h"

namespace commtune {

namespace {

// An idx file of unsigned bytes as a tensor of its dimensions.
at::Tensor read_idx(const std::string& file, std::size_t rank, DataBudget& budget) {
  const auto bytes = read_data_file(file, "data.path", budget);
  const auto header = parse_idx_header(bytes, rank, file);
  auto out = at::empty(header.dims, at::TensorOptions().dtype(at::kByte));
  std::memcpy(out.data_ptr(), bytes.data() + header.data_offset, bytes.size() - header.data_offset);
  return out;
}

std::unique_ptr<Dataset> make_mnist(const FileDatasetOptions& o, const DataContext&) {
  const std::string prefix = o.split == "train" ? "train" : "t10k";
  const auto dir = std::filesystem::path(o.path);
  DataBudget budget(o.max_gib);
  auto images = read_idx((dir / (prefix + "-images-idx3-ubyte")).string(), 3, budget);
  auto labels = read_idx((dir / (prefix + "-labels-idx1-ubyte")).string(), 1, budget);
  if (const auto most = labels.max().item<std::int64_t>(); most > 9)
    throw ConfigError("data.path", prefix + "-labels-idx1-ubyte holds label " + std::to_string(most) +
                                       " (at index " + std::to_string(labels.argmax().item<std::int64_t>()) +
                                       "): MNIST labels are 0..9");
  if (images.size(0) != labels.size(0))
    throw ConfigError("data.path", "MNIST images and labels differ in count (" + std::to_string(images.size(0)) +
                                       " vs " + std::to_string(labels.size(0)) + ")");
  if (o.limit > 0 && o.limit < images.size(0)) {
    images = images.narrow(0, 0, o.limit);
    labels = labels.narrow(0, 0, o.limit);
  }
  auto inputs = images.unsqueeze(1).to(at::kFloat).div_(255.0);
  if (o.normalize) inputs.sub_(0.1307).div_(0.3081);
  return std::make_unique<TensorDataset>(
      inputs.contiguous(), labels.to(at::kLong),
      DataSpec{{1, images.size(1), images.size(2)}, false, 10, Task::Classification});
}

}  // namespace

void register_mnist_dataset(DatasetRegistry& registry) {
  registry.add<FileDatasetOptions>(
      "mnist",
      "MNIST digits from train-images-idx3-ubyte, train-labels-idx1-ubyte (t10k-... for test) in data.path; "
      "normalised with mean 0.1307 and deviation 0.3081",
      make_mnist);
}

}  // namespace commtune

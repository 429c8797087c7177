// MNIST in its idx format (train-images-idx3-ubyte, ...), optionally gzipped.
#include <ATen/ATen.h>

#include <filesystem>

#include "core/data/builtin_datasets.h"
#include "core/data/file_reader.h"

namespace commtune {

namespace {

std::uint32_t big_endian(const std::vector<unsigned char>& b, std::size_t at) {
  return (std::uint32_t(b[at]) << 24) | (std::uint32_t(b[at + 1]) << 16) | (std::uint32_t(b[at + 2]) << 8) | b[at + 3];
}

// Parses an idx file of unsigned bytes: magic 0x00000800 | rank, then the sizes.
at::Tensor read_idx(const std::string& file, std::size_t expected_rank) {
  const auto bytes = read_data_file(file, "data.path");
  if (bytes.size() < 4 || big_endian(bytes, 0) != (0x800u | expected_rank))
    throw ConfigError("data.path", file + " is not an idx" + std::to_string(expected_rank) + "-ubyte file");
  std::vector<std::int64_t> sizes;
  std::size_t header = 4 + 4 * expected_rank;
  if (bytes.size() < header) throw ConfigError("data.path", file + " is truncated");
  std::int64_t count = 1;
  for (std::size_t d = 0; d < expected_rank; ++d) {
    sizes.push_back(big_endian(bytes, 4 + 4 * d));
    count *= sizes.back();
  }
  if (bytes.size() != header + static_cast<std::size_t>(count))
    throw ConfigError("data.path", file + " holds " + std::to_string(bytes.size() - header) + " data bytes, expected " +
                                       std::to_string(count));
  auto out = at::empty(sizes, at::TensorOptions().dtype(at::kByte));
  std::memcpy(out.data_ptr(), bytes.data() + header, count);
  return out;
}

std::unique_ptr<Dataset> make_mnist(const FileDatasetOptions& o, const DataContext&) {
  if (o.path.empty()) throw ConfigError("data.path", "set the folder holding the MNIST idx files");
  const std::string prefix = o.split == "train" ? "train" : "t10k";
  const auto dir = std::filesystem::path(o.path);
  auto images = read_idx((dir / (prefix + "-images-idx3-ubyte")).string(), 3);
  auto labels = read_idx((dir / (prefix + "-labels-idx1-ubyte")).string(), 1);
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

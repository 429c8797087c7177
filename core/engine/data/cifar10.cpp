// CIFAR-10 in its binary format: records of 1 label byte + 3x32x32 pixel bytes.
#include <ATen/ATen.h>

#include <filesystem>

#include "core/engine/data/builtin_datasets.h"
#include "core/engine/data/file_reader.h"

namespace commtune {

namespace {

constexpr auto kRecord = static_cast<std::int64_t>(kCifarRecordBytes);

std::unique_ptr<Dataset> make_cifar10(const FileDatasetOptions& o, const DataContext&) {
  namespace fs = std::filesystem;
  fs::path dir(o.path);
  if (fs::exists(dir / "cifar-10-batches-bin")) dir /= "cifar-10-batches-bin";
  std::vector<std::string> files;
  if (o.split == "test") {
    files.push_back((dir / "test_batch.bin").string());
  } else {
    for (int i = 1; i <= 5; ++i) {
      const auto f = dir / ("data_batch_" + std::to_string(i) + ".bin");
      if (fs::exists(f) || fs::exists(f.string() + ".gz") || i == 1) files.push_back(f.string());
    }
  }
  std::vector<unsigned char> all;
  DataBudget budget(o.max_gib);
  for (const auto& f : files) {
    auto bytes = read_data_file(f, "data.path", budget, cifar10_size_problem);
    check_cifar10_records(bytes, f);
    all.insert(all.end(), bytes.begin(), bytes.end());
  }
  std::int64_t count = static_cast<std::int64_t>(all.size()) / kRecord;
  if (o.limit > 0) count = std::min(count, o.limit);
  if (count == 0) throw ConfigError("data.path", "the CIFAR-10 files in " + dir.string() + " hold no records");
  auto raw = at::from_blob(all.data(), {count, kRecord}, at::TensorOptions().dtype(at::kByte)).clone();
  auto labels = raw.select(1, 0).to(at::kLong);
  auto inputs = raw.narrow(1, 1, kRecord - 1).reshape({count, 3, 32, 32}).to(at::kFloat).div_(255.0);
  if (o.normalize) {
    const auto mean = at::tensor({0.4914f, 0.4822f, 0.4465f}).view({1, 3, 1, 1});
    const auto stddev = at::tensor({0.2470f, 0.2435f, 0.2616f}).view({1, 3, 1, 1});
    inputs.sub_(mean).div_(stddev);
  }
  return std::make_unique<TensorDataset>(inputs.contiguous(), labels,
                                         DataSpec{{3, 32, 32}, false, 10, Task::Classification});
}

}  // namespace

void register_cifar10_dataset(DatasetRegistry& registry) {
  registry.add<FileDatasetOptions>(
      "cifar10",
      "CIFAR-10 images from data_batch_1..5.bin (test_batch.bin for test) in data.path or its "
      "cifar-10-batches-bin folder; normalised per channel",
      make_cifar10);
}

}  // namespace commtune

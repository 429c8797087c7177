#include "core/engine/data/data_loader.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace commtune {

Schema<LoaderOptions> LoaderOptions::schema() {
  return Schema<LoaderOptions>()
      .integer("batch_size", &LoaderOptions::batch_size, {1, 1 << 20}, "samples", "samples per batch on each rank")
      .flag("shuffle", &LoaderOptions::shuffle,
            "reshuffle every epoch as DistributedSampler(shuffle=True, seed=seed) does")
      .flag("drop_last", &LoaderOptions::drop_last,
            "drop each epoch's last, incomplete batch (DataLoader's drop_last)");
}

std::vector<std::int64_t> distributed_sampler_indices(std::int64_t dataset_size, int rank, int world_size, bool shuffle,
                                                      std::int64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> all(dataset_size);
  if (shuffle) {
    auto generator = at::detail::createCPUGenerator(static_cast<std::uint64_t>(seed + epoch));
    const auto perm = at::randperm(dataset_size, generator, at::TensorOptions().dtype(at::kLong));
    const auto* p = perm.data_ptr<std::int64_t>();
    std::copy(p, p + dataset_size, all.begin());
  } else {
    for (std::int64_t i = 0; i < dataset_size; ++i) all[i] = i;
  }
  const std::int64_t per_rank = (dataset_size + world_size - 1) / world_size;
  const std::int64_t total = per_rank * world_size;
  for (std::int64_t i = dataset_size; i < total; ++i) all.push_back(all[(i - dataset_size) % dataset_size]);
  std::vector<std::int64_t> mine;
  mine.reserve(per_rank);
  for (std::int64_t i = rank; i < total; i += world_size) mine.push_back(all[i]);
  return mine;
}

ShardedLoader::ShardedLoader(const Dataset& dataset, LoaderOptions options, int rank, int world_size, std::int64_t seed)
    : dataset_(dataset), options_(options), rank_(rank), world_size_(world_size), seed_(seed) {
  if (dataset.size() == 0) throw ConfigError("data", "the dataset is empty");
  if (batches_per_epoch() == 0)
    throw ConfigError("data.batch_size", "each rank holds " +
                                             std::to_string((dataset.size() + world_size - 1) / world_size) +
                                             " samples, fewer than one batch of " + std::to_string(options.batch_size) +
                                             " with drop_last");
}

std::int64_t ShardedLoader::batches_per_epoch() const {
  const std::int64_t per_rank = (dataset_.size() + world_size_ - 1) / world_size_;
  return options_.drop_last ? per_rank / options_.batch_size
                            : (per_rank + options_.batch_size - 1) / options_.batch_size;
}

Batch ShardedLoader::next() {
  const auto batch = static_cast<std::size_t>(options_.batch_size);
  const bool exhausted =
      epoch_ < 0 || position_ >= indices_.size() || (options_.drop_last && indices_.size() - position_ < batch);
  if (exhausted) {
    ++epoch_;
    indices_ = distributed_sampler_indices(dataset_.size(), rank_, world_size_, options_.shuffle, seed_, epoch_);
    position_ = 0;
  }
  const auto end = std::min(indices_.size(), position_ + batch);
  std::vector<std::int64_t> chosen(indices_.begin() + position_, indices_.begin() + end);
  position_ = end;
  return dataset_.gather(chosen);
}

}  // namespace commtune

namespace commtune {

void ShardedLoader::seek(std::int64_t epoch, std::int64_t position) {
  epoch_ = epoch;
  if (epoch < 0) {
    indices_.clear();
    position_ = 0;
    return;
  }
  indices_ = distributed_sampler_indices(dataset_.size(), rank_, world_size_, options_.shuffle, seed_, epoch_);
  if (position < 0 || position > static_cast<std::int64_t>(indices_.size()))
    throw std::runtime_error("loader position " + std::to_string(position) + " is outside epoch " +
                             std::to_string(epoch) + " (" + std::to_string(indices_.size()) + " samples)");
  position_ = static_cast<std::size_t>(position);
}

}  // namespace commtune

// Sharding and batching with the semantics of PyTorch's
// DistributedSampler(shuffle, seed, drop_last=False) feeding a DataLoader(batch_size,
// drop_last): rank r reads exactly the samples PyTorch's rank r reads, in the
// same order, so any run can be replayed in plain PyTorch DDP.
#pragma once

#include <cstdint>
#include <vector>

#include "core/engine/data/dataset.h"

namespace commtune {

struct LoaderOptions {
  std::int64_t batch_size = 32;
  bool shuffle = true;
  bool drop_last = false;

  static Schema<LoaderOptions> schema();
};

// DistributedSampler's index list for one rank and epoch: a permutation drawn
// with a CPU generator seeded seed + epoch (or 0..n-1), padded by repeating
// its head up to a multiple of world_size, then every world_size-th index.
std::vector<std::int64_t> distributed_sampler_indices(std::int64_t dataset_size, int rank, int world_size, bool shuffle,
                                                      std::int64_t seed, std::int64_t epoch);

class ShardedLoader {
 public:
  ShardedLoader(const Dataset& dataset, LoaderOptions options, int rank, int world_size, std::int64_t seed);

  // The next batch; a new epoch starts (and reshuffles) when one runs out.
  Batch next();
  std::int64_t epoch() const { return epoch_; }
  std::int64_t batches_per_epoch() const;
  // Where the loader stands (epoch, index into the epoch's samples), and
  // going back there: a resumed run reads the batches an uninterrupted one would.
  std::pair<std::int64_t, std::int64_t> position() const { return {epoch_, static_cast<std::int64_t>(position_)}; }
  void seek(std::int64_t epoch, std::int64_t position);

 private:
  const Dataset& dataset_;
  LoaderOptions options_;
  int rank_;
  int world_size_;
  std::int64_t seed_;
  std::int64_t epoch_ = -1;
  std::vector<std::int64_t> indices_;
  std::size_t position_ = 0;
};

}  // namespace commtune

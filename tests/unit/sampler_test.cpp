// The sampler and the bucket assignment must agree with PyTorch's own code,
// which the reference interpreter runs here.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/engine/data/data_loader.h"
#include "core/engine/ddp/flat_parameters.h"
#include "tests/support/python_oracle.h"

namespace {

struct SamplerCase {
  std::int64_t size;
  int world;
  bool shuffle;
  std::int64_t seed;
  std::int64_t epoch;
};

TEST(DistributedSampler, MatchesPyTorchForEveryRank) {
  const std::vector<SamplerCase> cases = {{10, 2, false, 0, 0}, {10, 3, false, 0, 0},   {7, 4, false, 0, 0},
                                          {100, 3, true, 0, 0}, {100, 3, true, 0, 5},   {101, 4, true, 42, 1},
                                          {5, 8, true, 7, 2},   {1000, 2, true, 123, 3}};
  nlohmann::json cases_json = nlohmann::json::array();
  for (const auto& c : cases) cases_json.push_back({c.size, c.world, c.shuffle, c.seed, c.epoch});
  const auto reference = commtune::testing::run_python(R"(
import json, torch
from torch.utils.data.distributed import DistributedSampler
out = []
for size, world, shuffle, seed, epoch in json.loads(')" +
                                                       cases_json.dump() + R"('):
    per_rank = []
    for rank in range(world):
        s = DistributedSampler(range(size), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed)
        s.set_epoch(epoch)
        per_rank.append(list(s))
    out.append(per_rank)
print(json.dumps(out))
)");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    for (int rank = 0; rank < c.world; ++rank) {
      const auto mine = commtune::distributed_sampler_indices(c.size, rank, c.world, c.shuffle, c.seed, c.epoch);
      EXPECT_EQ(mine, reference[i][rank].get<std::vector<std::int64_t>>())
          << "size " << c.size << " world " << c.world << " rank " << rank << " shuffle " << c.shuffle;
    }
  }
}

// A dataset whose input is its own index, to see which samples a batch holds.
class IndexDataset final : public commtune::Dataset {
 public:
  explicit IndexDataset(std::int64_t n) : n_(n) {}
  std::int64_t size() const override { return n_; }
  commtune::DataSpec spec() const override { return {{1}, true, 1, commtune::Task::Classification}; }
  commtune::Batch gather(const std::vector<std::int64_t>& indices) const override {
    auto t = at::tensor(indices, at::TensorOptions().dtype(at::kLong));
    return {t, t};
  }

 private:
  std::int64_t n_;
};

std::vector<std::int64_t> as_vector(const at::Tensor& t) {
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

TEST(ShardedLoader, BatchesFollowTheSamplerAcrossEpochs) {
  IndexDataset data(10);
  commtune::LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  commtune::ShardedLoader loader(data, o, /*rank=*/1, /*world=*/3, /*seed=*/0);
  // Rank 1 of 3 over 10 samples (padded to 12): 1, 4, 7, 0; then again.
  EXPECT_EQ(loader.batches_per_epoch(), 2);
  EXPECT_EQ(as_vector(loader.next().input), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(as_vector(loader.next().input), (std::vector<std::int64_t>{7, 0}));
  EXPECT_EQ(loader.epoch(), 0);
  EXPECT_EQ(as_vector(loader.next().input), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(loader.epoch(), 1);
}

TEST(ShardedLoader, KeepsOrDropsTheLastPartialBatch) {
  IndexDataset data(10);
  commtune::LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  commtune::ShardedLoader keep(data, o, 0, 2, 0);  // 0 2 4 6 | 8
  EXPECT_EQ(keep.next().input.numel(), 4);
  EXPECT_EQ(as_vector(keep.next().input), (std::vector<std::int64_t>{8}));
  o.drop_last = true;
  commtune::ShardedLoader drop(data, o, 0, 2, 0);
  EXPECT_EQ(drop.batches_per_epoch(), 1);
  drop.next();
  EXPECT_EQ(as_vector(drop.next().input), (std::vector<std::int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(drop.epoch(), 1);
  o.batch_size = 6;
  EXPECT_THROW(commtune::ShardedLoader(data, o, 0, 2, 0), commtune::ConfigError);
}

TEST(BucketAssignment, MatchesPyTorchsComputeBucketAssignmentBySize) {
  // Parameter sizes in float32 elements, and size limits in bytes.
  const std::vector<std::int64_t> numels = {1000, 10, 300000, 50, 262144, 1, 70000, 4096, 262145};
  const std::vector<std::vector<std::int64_t>> limit_sets = {{1 << 20}, {1 << 20, 25 << 20}, {4096, 1 << 20}, {1}};
  nlohmann::json input = {{"numels", numels}, {"limits", limit_sets}};
  const auto reference = commtune::testing::run_python(R"(
import json, torch, torch.distributed as dist
spec = json.loads(')" + input.dump() + R"(')
tensors = [torch.empty(n) for n in spec["numels"]]
out = []
for limits in spec["limits"]:
    buckets, _ = dist._compute_bucket_assignment_by_size(tensors, limits, [False] * len(tensors),
                                                          list(range(len(tensors))))
    out.append(buckets)
print(json.dumps(out))
)");
  std::vector<std::size_t> order(numels.size());
  std::vector<std::int64_t> bytes(numels.size());
  for (std::size_t i = 0; i < numels.size(); ++i) {
    order[i] = i;
    bytes[i] = numels[i] * 4;
  }
  for (std::size_t k = 0; k < limit_sets.size(); ++k) {
    const auto mine = commtune::assign_buckets(order, bytes, limit_sets[k]);
    EXPECT_EQ(nlohmann::json(mine), reference[k]) << "limits " << nlohmann::json(limit_sets[k]);
  }
}

}  // namespace

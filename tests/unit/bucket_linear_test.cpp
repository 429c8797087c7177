// BucketLinear against torch::nn::Linear under a real reducer (one rank over
// Gloo): the same gradients bit for bit, with the weights' computed in the
// bucket (the reducer copies only what arrives elsewhere).
#include <gtest/gtest.h>

#include <torch/nn/modules/linear.h>
#include <torch/torch.h>

#include <filesystem>
#include <limits>

#include "core/engine/ddp/reducer.h"
#include "core/engine/models/bucket_linear.h"

namespace {

using commtune::BucketLinear;

class PassThroughHook final : public commtune::CommHook {
 public:
  explicit PassThroughHook(double copy_scale = 1.0) : copy_scale_(copy_scale) {}
  commtune::Future run(commtune::GradBucket& bucket) override {
    return commtune::Communicator::completed(bucket.buffer());
  }
  double gradient_copy_scale() const override { return copy_scale_; }

 private:
  double copy_scale_;
};

struct OneRank {
  std::filesystem::path folder = std::filesystem::temp_directory_path() /
                                 ("commtune-bucket-linear-" + std::to_string(::getpid()) + "-" +
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::unique_ptr<commtune::Communicator> comm;
  OneRank() {
    std::filesystem::remove_all(folder);
    std::filesystem::create_directories(folder);
    commtune::DistEnv env;
    env.store_file = (folder / "store").string();
    comm = std::make_unique<commtune::Communicator>(env, commtune::CommBackend::Gloo, std::chrono::seconds(30));
  }
  ~OneRank() {
    comm.reset();
    std::filesystem::remove_all(folder);
  }
};

// Two layers, 12 -> 16 -> 5, and a loss whose gradient differs per element.
template <class Layer>
struct TwoLayers {
  Layer first{12, 16}, second{16, 5};
  commtune::NamedTensors parameters() {
    return {{"first.weight", first->weight},
            {"first.bias", first->bias},
            {"second.weight", second->weight},
            {"second.bias", second->bias}};
  }
  at::Tensor loss(const at::Tensor& x) { return second->forward(first->forward(x).relu_()).pow(2).sum(); }
};

template <class Layer>
void copy_weights(TwoLayers<Layer>& to, const TwoLayers<torch::nn::Linear>& from) {
  torch::NoGradGuard no_grad;
  to.first->weight.copy_(from.first->weight);
  to.first->bias.copy_(from.first->bias);
  to.second->weight.copy_(from.second->weight);
  to.second->bias.copy_(from.second->bias);
}

// A model of `Layer`s and its torch::nn::Linear reference, with the same seeded weights.
struct Seeded {
  explicit Seeded(std::uint64_t seed) { torch::manual_seed(seed); }
};
template <class Layer>
struct Twins {
  explicit Twins(std::uint64_t seed) : seeded(seed) { copy_weights(model, reference); }
  Seeded seeded;
  TwoLayers<torch::nn::Linear> reference;
  TwoLayers<Layer> model;
};

// Twins whose model's parameters a reducer on one rank can own.
template <class Layer>
struct OnOneRank : Twins<Layer> {
  OnOneRank(std::uint64_t seed, double copy_scale) : Twins<Layer>(seed), hook(copy_scale) {}
  OneRank rank;
  commtune::FlatParameters flat{this->model.parameters()};
  PassThroughHook hook;
  commtune::HookClock clock;
};

// Runs three reduced steps (the second rebuilds the buckets) and returns the
// gradient copy bytes of the last; checks every step's gradients bit for bit
// against plain autograd through torch::nn::Linear (and the captured local
// gradients, unscaled, when asked to capture them).
template <class Layer>
std::int64_t reduced_steps_match_autograd(double copy_scale, bool capture_local_gradients = false) {
  OnOneRank<Layer> setup(7, copy_scale);
  auto& reference = setup.reference;
  auto& model = setup.model;
  auto& flat = setup.flat;
  commtune::ReducerOptions options;
  options.first_bucket_cap_mb = 1e-6;  // rebuilt: the first gradient ready in a bucket of its own
  options.capture_local_gradients = capture_local_gradients;
  commtune::Reducer reducer(flat, *setup.rank.comm, setup.hook, setup.clock, options);
  std::int64_t copied = -1;
  for (int step = 0; step < 3; ++step) {
    const auto x = at::randn({9, 12});
    flat.grads().fill_(std::numeric_limits<float>::quiet_NaN());  // a diverged step's gradients must not leak in
    reducer.begin_step();
    model.loss(x).backward();
    copied = reducer.finish_backward().gradient_copy_bytes;
    for (auto& p : reference.parameters()) p.second.mutable_grad().reset();
    reference.loss(x).backward();
    const auto mine = model.parameters();
    const auto theirs = reference.parameters();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const auto& grad = mine[i].second.grad();
      EXPECT_TRUE(at::equal(grad, theirs[i].second.grad() * copy_scale)) << mine[i].first << " at step " << step;
      EXPECT_TRUE(grad.is_alias_of(flat.grads())) << mine[i].first << " is not in the gradient buffer";
    }
    if (capture_local_gradients) {
      const auto local = reducer.local_gradients();
      for (std::size_t i = 0; i < local.size(); ++i)
        EXPECT_TRUE(at::equal(local[i].second, theirs[i].second.grad())) << "local " << local[i].first;
    }
  }
  EXPECT_EQ(reducer.buckets().size(), 2u);
  return copied;
}

constexpr std::int64_t kBiasBytes = (16 + 5) * 4;
constexpr std::int64_t kAllBytes = (12 * 16 + 16 + 16 * 5 + 5) * 4;

TEST(BucketLinear, WeightGradientsAreComputedInTheBucketBitForBit) {
  EXPECT_EQ(reduced_steps_match_autograd<BucketLinear>(1.0), kBiasBytes);
}

TEST(BucketLinear, PlainLinearGradientsAreCopied) {
  EXPECT_EQ(reduced_steps_match_autograd<torch::nn::Linear>(1.0), kAllBytes);
}

TEST(BucketLinear, APowerOfTwoScaleOnTheWayInFoldsIntoTheProduct) {
  EXPECT_EQ(reduced_steps_match_autograd<BucketLinear>(0.25), kBiasBytes);
}

TEST(BucketLinear, CapturedLocalGradientsAreTheUnscaledOnes) {
  EXPECT_EQ(reduced_steps_match_autograd<BucketLinear>(0.5, true), kAllBytes);
  EXPECT_EQ(reduced_steps_match_autograd<BucketLinear>(1.0, true), kBiasBytes);
}

TEST(BucketLinear, AnInexactScaleOnTheWayInGetsEveryGradientCopied) {
  EXPECT_EQ(reduced_steps_match_autograd<BucketLinear>(1.0 / 3), kAllBytes);
}

TEST(BucketLinear, ABackwardTheReducerDidNotArmForLeavesTheBucketsAlone) {
  OnOneRank<BucketLinear> setup(3, 1.0);
  auto& reference = setup.reference;
  auto& model = setup.model;
  auto& flat = setup.flat;
  commtune::Reducer reducer(flat, *setup.rank.comm, setup.hook, setup.clock, {});
  const auto x = at::randn({4, 12});
  model.loss(x).backward();  // no begin_step
  reference.loss(x).backward();
  EXPECT_EQ(flat.grads().count_nonzero().item<std::int64_t>(), 0);
  EXPECT_FALSE(model.first->weight.grad().is_alias_of(flat.grads()));
  EXPECT_TRUE(at::equal(model.first->weight.grad(), reference.first->weight.grad()));
}

TEST(BucketLinear, WithoutAReducerItIsTorchLinear) {
  Twins<BucketLinear> twins(5);
  auto& reference = twins.reference;
  auto& model = twins.model;
  const auto x = at::randn({6, 12}).requires_grad_(true);
  const auto x_ref = x.detach().clone().requires_grad_(true);
  const auto out = model.second->forward(model.first->forward(x).relu_());
  const auto out_ref = reference.second->forward(reference.first->forward(x_ref).relu_());
  EXPECT_TRUE(at::equal(out, out_ref));
  out.pow(2).sum().backward();
  out_ref.pow(2).sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), x_ref.grad()));
  EXPECT_TRUE(at::equal(model.first->weight.grad(), reference.first->weight.grad()));
  EXPECT_TRUE(at::equal(model.second->bias.grad(), reference.second->bias.grad()));
}

}  // namespace

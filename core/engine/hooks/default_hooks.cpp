#include "core/engine/hooks/default_hooks.h"

#include <ATen/ATen.h>

namespace commtune {

namespace {

struct NoOptions {
  static Schema<NoOptions> schema() { return {}; }
};

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// A step's only bucket is ready when backward ends: the step then waits for its sum alone.
Communicator::Compute compute_during(const GradBucket& bucket) {
  return bucket.is_last() && bucket.index() == 0 ? Communicator::Compute::Waiting : Communicator::Compute::Busy;
}

// allreduce_hook: divide by the world size, then sum. For a power-of-two
// world size, x / 2^k and x * 2^-k are the same exactly rounded value, so the
// division rides along with the copy into the bucket and saves a pass; when
// wrapped, the bucket arrives unscaled and the hook divides itself.
class AllreduceHook final : public CommHook {
 public:
  explicit AllreduceHook(HookEnv& env) : env_(env), fold_division_(is_power_of_two(env.world_size())) {}
  Future run(GradBucket& bucket) override {
    auto buffer = bucket.buffer();
    if (bucket.gradient_scale() == 1.0) buffer.div_(env_.world_size());
    return env_.comm.allreduce_sum(buffer, compute_during(bucket));
  }
  double gradient_copy_scale() const override { return fold_division_ ? 1.0 / env_.world_size() : 1.0; }

 private:
  HookEnv& env_;
  bool fold_division_;
};

// DDP without a hook: the reducer scales by 1/world_size while copying the
// gradients into the bucket, and the bucket is summed.
class BuiltinReduction final : public CommHook {
 public:
  explicit BuiltinReduction(HookEnv& env) : env_(env) {}
  Future run(GradBucket& bucket) override {
    return env_.comm.allreduce_sum(bucket.buffer(), compute_during(bucket));
  }
  double gradient_copy_scale() const override { return 1.0 / env_.world_size(); }

 private:
  HookEnv& env_;
};

// fp16_compress_hook / bf16_compress_hook: cast, divide, sum, cast back.
// bf16 on Gloo runs its reduce-scatter phase synchronously (Communicator::allreduce_sum).
bool sum_blocks(at::ScalarType dtype, const HookEnv& env) {
  return dtype == at::kBFloat16 && env.comm.backend() == CommBackend::Gloo;
}

class CompressHook final : public CommHook {
 public:
  CompressHook(at::ScalarType dtype, HookEnv& env) : dtype_(dtype), env_(env) {}
  bool may_block() const override { return sum_blocks(dtype_, env_); }
  Future run(GradBucket& bucket) override {
    auto compressed = bucket.buffer().to(dtype_).div_(env_.world_size());
    auto buffer = bucket.buffer();
    return env_.timed_then(env_.comm.allreduce_sum(compressed), [buffer](at::Tensor reduced) {
      buffer.copy_(reduced);
      return buffer;
    });
  }

 private:
  at::ScalarType dtype_;
  HookEnv& env_;
};

class CompressWrapper final : public CommHook {
 public:
  CompressWrapper(at::ScalarType dtype, std::unique_ptr<CommHook> inner, HookEnv& env)
      : dtype_(dtype), inner_(std::move(inner)), env_(env) {}
  bool may_block() const override { return inner_->may_block() || sum_blocks(dtype_, env_); }
  void save_state(State& out) const override { inner_->save_state(out); }
  void load_state(const State& in) override { inner_->load_state(in); }
  void start(const FlatParameters& parameters) override { inner_->start(parameters); }
  void begin_step(std::int64_t step, double lr) override { inner_->begin_step(step, lr); }
  void after_optimizer_step(std::int64_t step, double lr, FlatParameters& parameters) override {
    inner_->after_optimizer_step(step, lr, parameters);
  }
  Future run(GradBucket& bucket) override {
    auto original = bucket.buffer();
    bucket.set_buffer(original.to(dtype_));
    return env_.timed_then(inner_->run(bucket), [original](at::Tensor reduced) {
      original.copy_(reduced);
      return original;
    });
  }

 private:
  at::ScalarType dtype_;
  std::unique_ptr<CommHook> inner_;
  HookEnv& env_;
};

// noop_hook: no communication; every rank keeps its own gradients.
class NoopHook final : public CommHook {
 public:
  Future run(GradBucket& bucket) override { return Communicator::completed(bucket.buffer()); }
};

}  // namespace

std::unique_ptr<CommHook> make_compress_wrapper(at::ScalarType dtype, std::unique_ptr<CommHook> inner, HookEnv& env) {
  return std::make_unique<CompressWrapper>(dtype, std::move(inner), env);
}

void register_default_hooks(HookRegistry& registry) {
  registry.add<NoOptions>("allreduce", "average gradients with one allreduce per bucket (allreduce_hook)",
                          [](const NoOptions&, HookEnv& env) { return std::make_unique<AllreduceHook>(env); });
  registry.add<NoOptions>(
      "none",
      "no hook: DDP's built-in reduction (gradients scaled by 1/world_size while copied into the bucket, then summed)",
      [](const NoOptions&, HookEnv& env) { return std::make_unique<BuiltinReduction>(env); });
  registry.add<NoOptions>(
      "fp16_compress", "cast to float16, divide by world size, allreduce, cast back (fp16_compress_hook)",
      [](const NoOptions&, HookEnv& env) { return std::make_unique<CompressHook>(at::kHalf, env); });
  registry.add<NoOptions>(
      "bf16_compress",
      "cast to bfloat16, divide by world size, allreduce, cast back (bf16_compress_hook; on Gloo the bf16 sum runs as "
      "alltoall + float32 sum + allgather)",
      [](const NoOptions&, HookEnv& env) { return std::make_unique<CompressHook>(at::kBFloat16, env); });
  registry.add<NoOptions>("noop", "no communication at all: each rank trains on its own gradients (noop_hook)",
                          [](const NoOptions&, HookEnv&) { return std::make_unique<NoopHook>(); });
}

std::unique_ptr<CommHook> make_hook(const HookRegistry& registry, const nlohmann::json& section, HookEnv& env) {
  auto hook = registry.create(section, env);
  const auto common = HookCommonOptions::schema().read(section, registry.section());
  if (common.wrapper == "fp16") return make_compress_wrapper(at::kHalf, std::move(hook), env);
  if (common.wrapper == "bf16") return make_compress_wrapper(at::kBFloat16, std::move(hook), env);
  return hook;
}

}  // namespace commtune

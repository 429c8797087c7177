#include "core/hooks/local_sgd.h"

#include <ATen/ATen.h>

#include <numeric>

#include "core/ddp/flat_parameters.h"

namespace commtune {

namespace {

// PostLocalSGDState's parameters, and PeriodicModelAverager's.
struct PostLocalSgdOptions {
  std::int64_t start_localSGD_iter = 10;
  bool post_local_gradient_allreduce = true;
  std::int64_t subgroup_size = 0;
  std::int64_t period = 4;
  std::int64_t warmup_steps = 0;

  static Schema<PostLocalSgdOptions> schema() {
    using O = PostLocalSgdOptions;
    return Schema<O>()
        .integer("start_localSGD_iter", &O::start_localSGD_iter, Range::at_least(0), "steps",
                 "average gradients over all ranks for this many steps, then only within subgroups")
        .flag("post_local_gradient_allreduce", &O::post_local_gradient_allreduce,
              "after start_localSGD_iter, still average gradients within each subgroup (false: every rank steps "
              "on its own gradients)")
        .integer("subgroup_size", &O::subgroup_size, {0, 4096}, "ranks",
                 "ranks per subgroup, consecutive (0: the ranks of one machine, as PyTorch's default intra-node "
                 "subgroups; in a local run, all ranks)")
        .integer("period", &O::period, Range::at_least(1), "steps",
                 "average the parameters over all ranks every this many steps (PeriodicModelAverager)")
        .integer("warmup_steps", &O::warmup_steps, Range::at_least(0), "steps",
                 "no parameter averaging before this step (PeriodicModelAverager's warmup_steps)");
  }
};

class PostLocalSgdHook final : public CommHook {
 public:
  PostLocalSgdHook(const PostLocalSgdOptions& o, HookEnv& env) : options_(o), env_(env) {
    const int world = env.world_size();
    const auto size = static_cast<int>(o.subgroup_size);
    if (size > 0 && world % size != 0)
      throw ConfigError("hook.subgroup_size",
                        "must divide the world size " + std::to_string(world) + ", got " + std::to_string(size));
    if (o.post_local_gradient_allreduce && size > 0 && size < world) {
      const int group = env.rank() / size;
      std::vector<int> members(static_cast<std::size_t>(size));
      std::iota(members.begin(), members.end(), group * size);
      subgroup_ = env.comm.split(members, "post-local-sgd-" + std::to_string(group) + "/");
    }
  }

  Future run(GradBucket& bucket) override {
    auto buffer = bucket.buffer();
    const bool local = iter_ >= options_.start_localSGD_iter;
    env_.stats.set("local_sgd", local ? 1 : 0);
    if (!local) {
      if (bucket.is_last()) ++iter_;  // PostLocalSGDState.maybe_increase_iter
      return average_over(env_.comm, buffer);
    }
    if (!options_.post_local_gradient_allreduce) return Communicator::completed(buffer);
    return average_over(subgroup_ ? *subgroup_ : env_.comm, buffer);
  }

  void after_optimizer_step(std::int64_t step, double, FlatParameters& parameters) override {
    // PeriodicModelAverager.average_parameters, its step being ours.
    const bool averages = step >= options_.warmup_steps && (step - options_.warmup_steps) % options_.period == 0;
    env_.stats.set("parameters_averaged", averages ? 1 : 0);
    if (averages) Communicator::wait(average_over(env_.comm, parameters.values()));
  }

  void save_state(State& out) const override { out.insert("iter", iter_); }
  void load_state(const State& in) override { iter_ = in.at("iter").toInt(); }

 private:
  PostLocalSgdOptions options_;
  HookEnv& env_;
  std::unique_ptr<Communicator> subgroup_;  // null: the world
  std::int64_t iter_ = 0;
};

}  // namespace

Future average_over(Communicator& comm, const at::Tensor& tensor) {
  tensor.div_(comm.size());
  return comm.allreduce_sum(tensor);
}

void register_local_sgd_hooks(HookRegistry& registry) {
  registry.add<PostLocalSgdOptions>(
      "post_local_sgd",
      "post-local SGD: allreduce gradients globally for start_localSGD_iter steps, then within subgroups (or not "
      "at all), averaging the parameters over all ranks every `period` steps (post_localSGD_hook + "
      "PeriodicModelAverager)",
      [](const PostLocalSgdOptions& options, HookEnv& env) {
        return std::make_unique<PostLocalSgdHook>(options, env);
      });
}

}  // namespace commtune

#include "core/engine/hooks/local_sgd.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <chrono>

#include "core/engine/ddp/flat_parameters.h"

namespace commtune {

Schema<PostLocalSgdOptions> PostLocalSgdOptions::schema() {
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
               "no parameter averaging before this step (PeriodicModelAverager's warmup_steps)")
      .text_checked("hierarchy", &O::hierarchy, [](const std::string& text) { hierarchy_levels(text); },
            "HierarchicalModelAverager instead of `period`: period:group_size pairs by increasing period, e.g. "
            "\"2:2,8:4\" (every 2 steps within groups of 2 consecutive ranks, every 8 over all 4); the last "
            "group size is the world size");
}

namespace {

// One level of a hierarchical averager, with its group.
struct AveragingLevel {
  std::int64_t period = 0;
  int group_size = 0;
  std::unique_ptr<Communicator> group;  // null: the world
};

// PyTorch's average_parameters: the parameters concatenated in registration
// order, divided, allreduced, copied back. Not the flat buffer in bucket
// order: Gloo's ring sums each element in an order set by its position in
// the buffer, so only the same layout gives the same bits on more than two ranks.
void average_parameters(Communicator& group, FlatParameters& parameters) {
  std::vector<at::Tensor> pieces;
  pieces.reserve(parameters.count());
  for (std::size_t i = 0; i < parameters.count(); ++i) pieces.push_back(parameters.parameter(i).reshape({-1}));
  auto flat = at::cat(pieces);
  Communicator::wait(average_over(group, flat));
  at::NoGradGuard no_grad;  // the parameters are autograd leaves
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < parameters.count(); ++i) {
    const auto n = parameters.numel(i);
    parameters.parameter(i).view({-1}).copy_(flat.narrow(0, offset, n));
    offset += n;
  }
}

class PostLocalSgdHook final : public CommHook {
 public:
  PostLocalSgdHook(const PostLocalSgdOptions& o, HookEnv& env) : options_(o), env_(env) {
    const int world = env.world_size();
    const auto size = static_cast<int>(o.subgroup_size);
    if (size > 0) check_group_size(world, size, "hook.subgroup_size");
    if (o.post_local_gradient_allreduce && size > 0 && size < world)
      subgroup_ = consecutive_group(env.comm, size, "hook.subgroup_size", "post-local-sgd");
    for (const auto& [period, group_size] : hierarchy_levels(o.hierarchy, world)) {
      AveragingLevel level{period, static_cast<int>(group_size), nullptr};
      if (level.group_size != world)
        level.group = consecutive_group(env.comm, level.group_size, "hook.hierarchy", "averager");
      levels_.push_back(std::move(level));
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
    // PeriodicModelAverager.average_parameters (or the hierarchical one's),
    // its step being ours.
    Communicator* group = nullptr;
    if (step >= options_.warmup_steps) {
      if (levels_.empty()) {
        if ((step - options_.warmup_steps) % options_.period == 0) group = &env_.comm;
      } else {
        for (auto level = levels_.rbegin(); level != levels_.rend() && !group; ++level)
          if (step % level->period == 0) group = level->group ? level->group.get() : &env_.comm;
      }
    }
    env_.stats.set("parameters_averaged", group ? group->size() : 0);
    if (!group) return;
    average_parameters(*group, parameters);
    const auto now = std::chrono::steady_clock::now();
    if (last_average_ != std::chrono::steady_clock::time_point{})
      env_.stats.set("averaging_interval_s", std::chrono::duration<double>(now - last_average_).count());
    last_average_ = now;
  }

  void save_state(State& out) const override { out.insert("iter", iter_); }
  void load_state(const State& in) override { iter_ = in.at("iter").toInt(); }

 private:
  PostLocalSgdOptions options_;
  HookEnv& env_;
  std::unique_ptr<Communicator> subgroup_;  // null: the world
  std::vector<AveragingLevel> levels_;      // empty: PeriodicModelAverager
  std::int64_t iter_ = 0;
  std::chrono::steady_clock::time_point last_average_{};
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

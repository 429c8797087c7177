#include "core/engine/hooks/slowmo.h"

#include <ATen/ATen.h>

#include <chrono>

#include "core/engine/ddp/flat_parameters.h"
#include "core/engine/hooks/local_sgd.h"

namespace commtune {

namespace {

// SlowMoDistributedDataParallel's parameters, under its names.
struct SlowMoOptions {
  std::string slowmo_base_algorithm = "localsgd";
  std::int64_t localsgd_frequency = 3;
  std::int64_t slowmo_frequency = 48;
  double slowmo_momentum = 0.5;
  double slowmo_lr = 1.0;
  std::int64_t nprocs_per_node = 1;
  bool slowmo_memory_efficient = true;
  std::int64_t slowmo_num_shards = 32;
  std::string sgp_graph = "exponential";

  static Schema<SlowMoOptions> schema() {
    using O = SlowMoOptions;
    return Schema<O>()
        .choice("slowmo_base_algorithm", &O::slowmo_base_algorithm, {"localsgd", "sgp"},
                "how ranks stay close between slow momentum steps: localsgd (parameter averaging every "
                "localsgd_frequency steps) or sgp (stochastic gradient push: one push-sum gossip round with one "
                "peer of a directed exponential graph every step)")
        .integer("localsgd_frequency", &O::localsgd_frequency, Range::at_least(1), "steps",
                 "average the parameters over all ranks every this many steps")
        .integer("slowmo_frequency", &O::slowmo_frequency, Range::at_least(1), "steps",
                 "exact average and slow momentum step every this many steps")
        .real("slowmo_momentum", &O::slowmo_momentum, {0, 1, false, true}, "",
              "slow momentum beta (0 with slowmo_lr 1: no slow momentum, plain local SGD)")
        .real("slowmo_lr", &O::slowmo_lr, Range::above(0), "", "slow learning rate alpha, relative to the optimizer's")
        .integer("nprocs_per_node", &O::nprocs_per_node, {1, 4096}, "ranks",
                 "ranks per node: gradients are averaged within a node every step (1: not at all)")
        .flag("slowmo_memory_efficient", &O::slowmo_memory_efficient,
              "shard the slow momentum buffers over slowmo_num_shards ranks (reduce, update, broadcast) instead "
              "of keeping them whole on every rank")
        .integer("slowmo_num_shards", &O::slowmo_num_shards, {1, 4096}, "ranks",
                 "memory-efficient: ranks that hold a portion of the buffers (at most the world size)")
        .choice("sgp_graph", &O::sgp_graph, {"exponential", "ring"},
                "SGP's peer graph, one peer per step: exponential (2^(t mod log2 p) ranks ahead, as fairscale's "
                "dynamic directed exponential graph) or ring (the next rank)");
  }
};

// The parameters in model order (as fairscale flattens them: parameter by
// parameter), whatever the flat buffer's bucket layout: a range of them is
// a list of views into the flat buffer.
class ModelOrderRange {
 public:
  ModelOrderRange(const FlatParameters& flat, std::int64_t start, std::int64_t end) {
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < flat.count(); ++i) {
      const auto numel = flat.numel(i);
      const auto lo = std::max(start, offset), hi = std::min(end, offset + numel);
      if (lo < hi) views_.push_back(flat.values().narrow(0, flat.offset(i) + (lo - offset), hi - lo));
      offset += numel;
    }
  }
  at::Tensor gather() const { return views_.empty() ? at::Tensor() : at::cat(views_); }
  void scatter(const at::Tensor& values) const {
    std::int64_t at = 0;
    for (const auto& v : views_) {
      v.copy_(values.narrow(0, at, v.numel()));
      at += v.numel();
    }
  }

 private:
  std::vector<at::Tensor> views_;
};

class SlowMoHook final : public CommHook {
 public:
  SlowMoHook(const SlowMoOptions& o, HookEnv& env) : options_(o), env_(env) {
    const int world = env.world_size();
    const auto per_node = static_cast<int>(o.nprocs_per_node);
    check_group_size(world, per_node, "hook.nprocs_per_node");
    if (per_node > 1) node_ = consecutive_group(env.comm, per_node, "hook.nprocs_per_node", "slowmo-node");
    shards_ = o.slowmo_memory_efficient ? static_cast<int>(std::min<std::int64_t>(o.slowmo_num_shards, world)) : 1;
  }

  // Gradients: averaged within the node, or kept local.
  Future run(GradBucket& bucket) override {
    auto buffer = bucket.buffer();
    if (node_) return average_over(*node_, buffer);
    return Communicator::completed(buffer);
  }

  // x_old starts as the parameters every rank starts from; u at zero. Each
  // rank keeps its own portion (all of it unless memory-efficient).
  void start(const FlatParameters& flat) override {
    if (!slowmo_enabled() || !holds_buffers()) return;
    old_params_ = own_range(flat).gather().clone();
    momentum_ = at::zeros_like(old_params_);
  }

  void after_optimizer_step(std::int64_t step, double lr, FlatParameters& flat) override {
    const bool slow_step = slowmo_enabled() && (step + 1) % options_.slowmo_frequency == 0;
    const bool sgp = options_.slowmo_base_algorithm == "sgp";
    // The memory-efficient slow step replaces that step's gossip (as in fairscale).
    if (sgp && !(slow_step && options_.slowmo_memory_efficient)) gossip(step, flat.values());
    const bool local_sgd_step = !sgp && (step + 1) % options_.localsgd_frequency == 0;
    // The memory-efficient slow step averages on its own (reduce, then broadcast).
    const bool averages = (local_sgd_step || slow_step) && !(slow_step && options_.slowmo_memory_efficient);
    if (averages) Communicator::wait(average_over(env_.comm, flat.values()));
    env_.stats.set("parameters_averaged", averages || slow_step ? 1 : 0);
    if (averages || slow_step) {
      const auto now = std::chrono::steady_clock::now();
      if (last_average_ != std::chrono::steady_clock::time_point{})
        env_.stats.set("averaging_interval_s", std::chrono::duration<double>(now - last_average_).count());
      last_average_ = now;
    }
    env_.stats.set("slowmo_step", slow_step ? 1 : 0);
    if (!slow_step) return;
    if (holds_buffers() && !old_params_.defined())
      throw std::runtime_error("SlowMo: its buffers were never set (no start, no checkpoint)");
    if (!options_.slowmo_memory_efficient) {
      const ModelOrderRange all(flat, 0, flat.total_numel());
      all.scatter(slow_momentum_step(all.gather(), lr));
      return;
    }
    // fairscale's _distributed_comm: every rank divides, each shard's portion
    // is reduced to its owner, owners step, and broadcast their portion.
    flat.values().div_(env_.world_size());
    for (int owner = 0; owner < shards_; ++owner) {
      const auto range = shard_range(flat, owner);
      auto portion = range.gather();
      if (!portion.defined()) continue;
      Communicator::wait(env_.comm.reduce_sum(portion, owner));
      if (owner == env_.rank()) range.scatter(slow_momentum_step(portion, lr));
    }
    for (int owner = 0; owner < shards_; ++owner) {
      const auto range = shard_range(flat, owner);
      auto portion = range.gather();
      if (!portion.defined()) continue;
      range.scatter(Communicator::wait(env_.comm.broadcast(portion, owner)));
    }
  }

  void save_state(State& out) const override {
    // A 0-dim float64 tensor: torch.load(weights_only=True) refuses Python floats in 1.13.
    out.insert("ps_weight", at::scalar_tensor(push_sum_weight_, at::kDouble));
    if (!old_params_.defined()) return;
    out.insert("old_params", old_params_);
    out.insert("global_momentum_buffer", momentum_);
  }
  void load_state(const State& in) override {
    if (in.contains("ps_weight")) push_sum_weight_ = in.at("ps_weight").toTensor().item<double>();
    if (!in.contains("old_params")) return;
    old_params_ = in.at("old_params").toTensor();
    momentum_ = in.at("global_momentum_buffer").toTensor();
  }

 private:
  // One push-sum round (Kempe et al.; SGP, Assran et al. 2019): at step t
  // this rank keeps half of (w x, w) and pushes the other half to its peer
  // (2^(t mod log2 p) ranks ahead, or the next on a ring), receiving from the
  // one as far behind; then
  // x = numerator / w. The graph is regular, so w stays 1 up to rounding
  // and the estimate needs no de-biasing drift correction.
  void gossip(std::int64_t step, const at::Tensor& parameters) {
    const int world = env_.world_size();
    if (world == 1) return;
    int phases = 0;
    while ((1 << phases) < world) ++phases;
    const int offset = options_.sgp_graph == "ring" ? 1 : 1 << static_cast<int>(step % phases);
    const int to = (env_.rank() + offset) % world, from = (env_.rank() - offset % world + world) % world;
    const auto n = parameters.numel();
    auto message = at::empty({n + 1}, parameters.options());
    message.narrow(0, 0, n).copy_(parameters).mul_(0.5 * push_sum_weight_);
    message[n] = 0.5 * push_sum_weight_;
    auto received = at::empty_like(message);
    env_.comm.send_receive(message, to, received, from);
    message.add_(received);
    push_sum_weight_ = message[n].item<double>();
    parameters.copy_(message.narrow(0, 0, n)).div_(push_sum_weight_);
    env_.stats.set("ps_weight", push_sum_weight_);
  }

  bool slowmo_enabled() const { return options_.slowmo_lr != 1.0 || options_.slowmo_momentum != 0.0; }
  bool holds_buffers() const { return !options_.slowmo_memory_efficient || env_.rank() < shards_; }

  // Shard `owner`'s portion: world_portion_length = ceil(total / shards) elements in model order.
  ModelOrderRange shard_range(const FlatParameters& flat, int owner) const {
    const auto total = flat.total_numel();
    const auto length = (total + shards_ - 1) / shards_;
    return {flat, std::min<std::int64_t>(owner * length, total), std::min<std::int64_t>((owner + 1) * length, total)};
  }
  ModelOrderRange own_range(const FlatParameters& flat) const {
    return options_.slowmo_memory_efficient ? shard_range(flat, env_.rank())
                                            : ModelOrderRange(flat, 0, flat.total_numel());
  }

  // fairscale's _perform_local_optimization on `x`, the averaged parameters; returns the new ones.
  at::Tensor slow_momentum_step(const at::Tensor& x, double lr) {
    momentum_.mul_(options_.slowmo_momentum).sub_(x, 1 / lr).add_(old_params_, 1 / lr);
    old_params_.add_(momentum_, -lr * options_.slowmo_lr);
    return old_params_.clone();
  }

  SlowMoOptions options_;
  HookEnv& env_;
  std::unique_ptr<Communicator> node_;
  int shards_ = 1;
  at::Tensor old_params_, momentum_;  // this rank's portion, in model order
  double push_sum_weight_ = 1.0;
  std::chrono::steady_clock::time_point last_average_{};
};

}  // namespace

void register_slowmo_hooks(HookRegistry& registry) {
  registry.add<SlowMoOptions>(
      "slowmo",
      "SlowMo: local SGD (parameters averaged every localsgd_frequency steps, gradients at most within a node) "
      "with a slow momentum step every slowmo_frequency steps (fairscale's SlowMoDistributedDataParallel)",
      [](const SlowMoOptions& options, HookEnv& env) { return std::make_unique<SlowMoHook>(options, env); });
}

}  // namespace commtune

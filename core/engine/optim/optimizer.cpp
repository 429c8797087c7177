#include "core/engine/optim/optimizer.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>

#include "core/engine/kernel_bridge.h"

namespace commtune {

Schema<OptimizerCommon> OptimizerCommon::schema() {
  return Schema<OptimizerCommon>()
      .real("lr", &OptimizerCommon::lr, {0, 10, true}, "", "learning rate", true)
      .real("weight_decay", &OptimizerCommon::weight_decay, {0, 1}, "", "L2 penalty added to the gradient")
      .integer("warmup_steps", &OptimizerCommon::warmup_steps, Range::at_least(0), "steps",
               "linear learning-rate warm-up length (0: none)");
}

double OptimizerCommon::lr_at(std::int64_t step) const {
  if (warmup_steps <= 0) return lr;
  return lr * std::min(1.0, static_cast<double>(step + 1) / static_cast<double>(warmup_steps));
}

namespace {

struct SgdOptions {
  double momentum = 0.9;
  double dampening = 0;
  bool nesterov = false;
  static Schema<SgdOptions> schema() {
    return Schema<SgdOptions>()
        .real("momentum", &SgdOptions::momentum, {0, 1, false, true}, "", "momentum factor")
        .real("dampening", &SgdOptions::dampening, {0, 1}, "", "dampening for momentum")
        .flag("nesterov", &SgdOptions::nesterov, "Nesterov momentum");
  }
};

// torch.optim.SGD (foreach off): momentum buffer starts as the first gradient.
class Sgd final : public Optimizer {
 public:
  Sgd(FlatParameters& params, const OptimizerCommon& common, const SgdOptions& o)
      : params_(params), common_(common), options_(o) {
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      throw ConfigError("optimizer.nesterov", "Nesterov momentum requires a momentum > 0 and zero dampening");
  }
  void begin_step(double lr) override {
    step_.lr = static_cast<float>(lr);
    step_.momentum = static_cast<float>(options_.momentum);
    step_.one_minus_dampening = static_cast<float>(1.0 - options_.dampening);
    step_.weight_decay = static_cast<float>(common_.weight_decay);
    step_.nesterov = options_.nesterov;
    step_.first_step = !params_.has_state("momentum_buffer");
    buffer_ = options_.momentum != 0 ? params_.state("momentum_buffer").data_ptr<float>() : nullptr;
  }
  void update(std::int64_t offset, std::int64_t numel) override {
    const auto& values = params_.values();
    kernels::sgd_step(kernel_device(values), values.data_ptr<float>() + offset,
                      params_.grads().data_ptr<float>() + offset, buffer_ ? buffer_ + offset : nullptr, numel, step_,
                      kernel_stream(values));
  }

 private:
  FlatParameters& params_;
  OptimizerCommon common_;
  SgdOptions options_;
  kernels::SgdStep step_;   // this step's settings, from begin_step
  float* buffer_ = nullptr;  // the momentum buffer, when there is momentum
};

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  static Schema<AdamOptions> schema() {
    return Schema<AdamOptions>()
        .real("beta1", &AdamOptions::beta1, {0, 1, false, true}, "", "decay of the first moment")
        .real("beta2", &AdamOptions::beta2, {0, 1, false, true}, "", "decay of the second moment")
        .real("eps", &AdamOptions::eps, {0, 1, true}, "", "added to the denominator", true);
  }
};

// torch.optim.Adam (amsgrad off, foreach off), bias-corrected.
class Adam final : public Optimizer {
 public:
  Adam(FlatParameters& params, const OptimizerCommon& common, const AdamOptions& o)
      : params_(params), common_(common), options_(o) {}
  void begin_step(double lr) override {
    const double t = static_cast<double>(++steps_);
    const double bias_correction1 = 1.0 - std::pow(options_.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(options_.beta2, t);
    step_.beta1 = static_cast<float>(options_.beta1);
    step_.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
    step_.beta2 = static_cast<float>(options_.beta2);
    step_.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
    step_.weight_decay = static_cast<float>(common_.weight_decay);
    step_.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    step_.eps = static_cast<float>(options_.eps);
    step_.neg_step_size = static_cast<float>(-(lr / bias_correction1));
    step_.lerp_first_moment = TORCH_VERSION_MAJOR >= 2;
  }
  void update(std::int64_t offset, std::int64_t numel) override {
    const auto& values = params_.values();
    float* param = values.data_ptr<float>() + offset;
    const float* grad = params_.grads().data_ptr<float>() + offset;
    float* exp_avg = params_.state("exp_avg").data_ptr<float>() + offset;
    const auto& exp_avg_sq = params_.state("exp_avg_sq");
    float* v = exp_avg_sq.data_ptr<float>() + offset;
    if (!values.is_cpu()) {
      kernels::adam_step(kernel_device(values), param, grad, exp_avg, v, numel, step_, kernel_stream(values));
      return;
    }
    // torch.optim.Adam's square root is ATen's: on the PyPI wheels MKL's,
    // within an ulp of the correctly rounded one, not always equal to it. It
    // is taken between the moments and the update, a cache-sized piece at a time.
    constexpr std::int64_t kPiece = 16384;
    if (!root_.defined()) root_ = at::empty({kPiece}, values.options());
    for (std::int64_t first = 0; first < numel; first += kPiece) {
      const auto count = std::min(kPiece, numel - first);
      kernels::adam_moments(param + first, grad + first, exp_avg + first, v + first, count, step_);
      auto root = root_.narrow(0, 0, count);
      at::sqrt_out(root, exp_avg_sq.narrow(0, offset + first, count));
      kernels::adam_apply(param + first, exp_avg + first, root.data_ptr<float>(), count, step_);
    }
  }
  void save_state(c10::impl::GenericDict& out) const override { out.insert("adam_steps", steps_); }
  void load_state(const c10::impl::GenericDict& in) override { steps_ = in.at("adam_steps").toInt(); }

 private:
  FlatParameters& params_;
  OptimizerCommon common_;
  AdamOptions options_;
  std::int64_t steps_ = 0;
  kernels::AdamStep step_;  // this step's settings, from begin_step
  at::Tensor root_;         // a piece's square roots of the second moment (CPU)
};

}  // namespace

void register_builtin_optimizers(OptimizerRegistry& registry) {
  registry.add<SgdOptions>("sgd", "stochastic gradient descent with momentum (torch.optim.SGD)",
                           [](const SgdOptions& o, FlatParameters& params, const OptimizerCommon& common) {
                             return std::make_unique<Sgd>(params, common, o);
                           });
  registry.add<AdamOptions>("adam", "Adam (torch.optim.Adam, amsgrad off)",
                            [](const AdamOptions& o, FlatParameters& params, const OptimizerCommon& common) {
                              return std::make_unique<Adam>(params, common, o);
                            });
}

}  // namespace commtune

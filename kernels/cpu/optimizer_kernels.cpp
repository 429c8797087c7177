// CPU fused optimizer steps. Built with -ffp-contract=off so that only the
// explicit std::fma calls fuse: the rounding sequence is the contract.
#include <cmath>

#include "kernels/cpu/dispatch.h"
#include "kernels/kernels.h"

namespace commtune::kernels::cpu {

COMMTUNE_CPU_CLONES
void sgd_step(float* __restrict param, const float* __restrict grad, float* __restrict buf, std::int64_t n,
              const SgdStep& h) {
  const float wd = h.weight_decay, m = h.momentum, damp = h.one_minus_dampening, neg_lr = -h.lr;
  const bool decay = wd != 0.0f, use_momentum = m != 0.0f, nesterov = h.nesterov, first = h.first_step;
  for (std::int64_t i = 0; i < n; ++i) {
    float d = decay ? std::fma(param[i], wd, grad[i]) : grad[i];
    if (use_momentum) {
      const float b = first ? d : std::fma(d, damp, buf[i] * m);
      buf[i] = b;
      d = nesterov ? std::fma(b, m, d) : b;
    }
    param[i] = std::fma(d, neg_lr, param[i]);
  }
}

COMMTUNE_CPU_CLONES
void adam_step(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
               float* __restrict exp_avg_sq, std::int64_t n, const AdamStep& h) {
  const float wd = h.weight_decay;
  const bool decay = wd != 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = decay ? std::fma(param[i], wd, grad[i]) : grad[i];
    const float m = std::fma(g, h.one_minus_beta1, exp_avg[i] * h.beta1);
    const float v = std::fma(h.one_minus_beta2 * g, g, exp_avg_sq[i] * h.beta2);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = std::sqrt(v) / h.bias_correction2_sqrt + h.eps;
    param[i] = param[i] + (h.neg_step_size * m) / denom;
  }
}

}  // namespace commtune::kernels::cpu

// CPU fused optimizer steps. Built with -ffp-contract=off so that only the
// explicit fused multiply-adds fuse: the rounding sequence is the contract.
// __builtin_fmaf, not std::fma: the builtin expands in each clone's own
// target (one vfmadd in the AVX2 clone), std::fma's body stays a libm call.

#include "kernels/cpu/dispatch.h"
#include "kernels/kernels.h"

namespace commtune::kernels::cpu {

COMMTUNE_CPU_CLONES
void sgd_step(float* __restrict param, const float* __restrict grad, float* __restrict buf, std::int64_t n,
              const SgdStep& h) {
  const float wd = h.weight_decay, m = h.momentum, damp = h.one_minus_dampening, neg_lr = -h.lr;
  const bool decay = wd != 0.0f, use_momentum = m != 0.0f, nesterov = h.nesterov, first = h.first_step;
  for (std::int64_t i = 0; i < n; ++i) {
    float d = decay ? __builtin_fmaf(param[i], wd, grad[i]) : grad[i];
    if (use_momentum) {
      const float b = first ? d : __builtin_fmaf(d, damp, buf[i] * m);
      buf[i] = b;
      d = nesterov ? __builtin_fmaf(b, m, d) : b;
    }
    param[i] = __builtin_fmaf(d, neg_lr, param[i]);
  }
}

COMMTUNE_CPU_CLONES
void adam_step(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
               float* __restrict exp_avg_sq, std::int64_t n, const AdamStep& h) {
  const float wd = h.weight_decay;
  const bool decay = wd != 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = decay ? __builtin_fmaf(param[i], wd, grad[i]) : grad[i];
    const float m = __builtin_fmaf(g, h.one_minus_beta1, exp_avg[i] * h.beta1);
    const float v = __builtin_fmaf(h.one_minus_beta2 * g, g, exp_avg_sq[i] * h.beta2);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = __builtin_sqrtf(v) / h.bias_correction2_sqrt + h.eps;
    param[i] = param[i] + (h.neg_step_size * m) / denom;
  }
}

}  // namespace commtune::kernels::cpu

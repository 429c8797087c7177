// CPU fused optimizer steps. Built with -ffp-contract=off so that only the
// explicit fused multiply-adds fuse: the rounding sequence is the contract.
// __builtin_fmaf, not std::fma: the builtin expands in each clone's own
// target (one vfmadd in the AVX2 clone), std::fma's body stays a libm call.

#include "kernels/cpu/dispatch.h"
#include "kernels/kernels.h"

namespace commtune::kernels::cpu {

namespace {

// ATen's vectorised lerp (weights of magnitude under 0.5 from the start, the
// others from the end), one FMA either way.
[[gnu::always_inline]] inline float lerp(float start, float end, float weight) {
  return __builtin_fabsf(weight) < 0.5f ? __builtin_fmaf(weight, end - start, start)
                                        : __builtin_fmaf(weight - 1.0f, end - start, end);
}

struct Moments {
  float m, v;
};

// One element's new first and second moments (weight decay folded into the gradient).
[[gnu::always_inline]] inline Moments adam_moment(float param, float grad, float m, float v, const AdamStep& h) {
  const float g = h.weight_decay != 0.0f ? __builtin_fmaf(param, h.weight_decay, grad) : grad;
  return {h.lerp_first_moment ? lerp(m, g, h.one_minus_beta1) : __builtin_fmaf(g, h.one_minus_beta1, m * h.beta1),
          __builtin_fmaf(h.one_minus_beta2 * g, g, v * h.beta2)};
}

// The parameter's update from its first moment and the second's square root.
[[gnu::always_inline]] inline float adam_update(float param, float m, float root, const AdamStep& h) {
  return param + (h.neg_step_size * m) / (root / h.bias_correction2_sqrt + h.eps);
}

}  // namespace

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
  for (std::int64_t i = 0; i < n; ++i) {
    const auto [m, v] = adam_moment(param[i], grad[i], exp_avg[i], exp_avg_sq[i], h);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = adam_update(param[i], m, __builtin_sqrtf(v), h);
  }
}

COMMTUNE_CPU_CLONES
void adam_moments(const float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                  float* __restrict exp_avg_sq, std::int64_t n, const AdamStep& h) {
  for (std::int64_t i = 0; i < n; ++i) {
    const auto [m, v] = adam_moment(param[i], grad[i], exp_avg[i], exp_avg_sq[i], h);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

COMMTUNE_CPU_CLONES
void adam_apply(float* __restrict param, const float* __restrict exp_avg, const float* __restrict root,
                std::int64_t n, const AdamStep& h) {
  for (std::int64_t i = 0; i < n; ++i) param[i] = adam_update(param[i], exp_avg[i], root[i], h);
}

}  // namespace commtune::kernels::cpu

// Compute kernels behind one small dispatch API. Raw pointers and sizes only:
// no torch, no Qt; core/ hands in tensor storage. Every kernel has a CPU and a
// CUDA implementation that produce the same bits (tests compare them).
#pragma once

#include <cstdint>

namespace commtune::kernels {

enum class Device { Cpu, Cuda };

// True when this build carries the CUDA implementations.
bool cuda_compiled();

// Hyperparameters already converted to float the way PyTorch converts a Python
// scalar for a float32 tensor op (double -> float).
struct SgdStep {
  float lr = 0;
  float momentum = 0;
  float one_minus_dampening = 1;
  float weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // momentum buffer is initialised from the gradient
};

// One fused pass of torch.optim.SGD over n elements, rounding exactly like the
// vectorised ATen op sequence of `_single_tensor_sgd`:
//   d = fma(p, wd, g); b = first ? d : fma(d, 1 - dampening, b * m);
//   d = nesterov ? fma(b, m, d) : b;  p = fma(d, -lr, p)
// `momentum_buffer` may be null when momentum == 0.
void sgd_step(Device device, float* param, const float* grad, float* momentum_buffer, std::int64_t n, const SgdStep& h,
              void* stream = nullptr);

struct AdamStep {
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float weight_decay = 0;
  float bias_correction2_sqrt = 1;  // sqrt(1 - beta2^t), computed in double, then converted
  float eps = 1e-8f;
  float neg_step_size = 0;  // -lr / (1 - beta1^t), computed in double, then converted
  // The first moment as PyTorch 2.x's Adam takes it, m.lerp_(g, 1 - b1), in
  // place of 1.13's m.mul_(b1).add_(g, alpha=1 - b1).
  bool lerp_first_moment = false;
};

// One fused pass of torch.optim.Adam (amsgrad off), rounding like the ATen
// ops of `_single_tensor_adam` as built (add's alpha, addcmul's and lerp's
// multiply-adds are one FMA there):
//   g = fma(p, wd, g);
//   m = fma(g, 1 - b1, m * b1)                       (1.13)
//   m = w < 0.5 ? fma(w, g - m, m) : fma(w - 1, g - m, g), w = 1 - b1   (2.x: lerp)
//   v = fma((1 - b2) * g, g, v * b2);
//   p = p + (-step_size * m) / (sqrt(v) / bc2_sqrt + eps)
void adam_step(Device device, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n,
               const AdamStep& h, void* stream = nullptr);

// adam_step in two halves on the CPU, for a square root taken between them by
// the caller: ATen's, where it is not the correctly rounded one (the PyPI
// wheels take it from MKL's VML, within an ulp).
//   adam_moments: m and v as adam_step updates them (param is only read);
//   adam_apply:   p = p + (-step_size * m) / (root / bc2_sqrt + eps), root = sqrt(v).
void adam_moments(const float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n,
                  const AdamStep& h);
void adam_apply(float* param, const float* exp_avg, const float* root, std::int64_t n, const AdamStep& h);

// Error feedback, step in: x = gradient + error, written to both (the bucket
// then holds x, and the error buffer keeps it for the step out).
void add_into_both(Device device, float* gradient, float* error, std::int64_t n, void* stream = nullptr);

// Error feedback, step out: error = x - approximation, where `error` holds x;
// returns the sum of the new error's squares, accumulated in double.
double subtract_and_square_sum(Device device, float* error, const float* approximation, std::int64_t n,
                               void* stream = nullptr);

// out[i] = bf16(sum over r of float(rows[r * n + i])), summed in row order in
// float32 and rounded once (round to nearest even). bf16 values are raw bits.
void sum_bf16_rows(Device device, const std::uint16_t* rows, std::int64_t row_count, std::int64_t n, std::uint16_t* out,
                   void* stream = nullptr);

}  // namespace commtune::kernels

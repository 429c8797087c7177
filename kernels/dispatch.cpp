#include <stdexcept>

#include "kernels/cpu/dispatch.h"
#include "kernels/kernels.h"

namespace commtune::kernels {

#if !defined(COMMTUNE_HAVE_CUDA_KERNELS)
namespace {
[[noreturn]] void no_cuda() {
  throw std::runtime_error("commtune was built without CUDA kernels (configure with the CUDA toolkit present)");
}
}  // namespace
#endif

bool cuda_compiled() {
#if defined(COMMTUNE_HAVE_CUDA_KERNELS)
  return true;
#else
  return false;
#endif
}

#if defined(COMMTUNE_HAVE_CUDA_KERNELS)
#define COMMTUNE_DISPATCH(name, ...)                                  \
  if (device == Device::Cuda) return cuda::name(__VA_ARGS__, stream); \
  return cpu::name(__VA_ARGS__)
#else
#define COMMTUNE_DISPATCH(name, ...)     \
  if (device == Device::Cuda) no_cuda(); \
  (void)stream;                          \
  return cpu::name(__VA_ARGS__)
#endif

void sgd_step(Device device, float* param, const float* grad, float* momentum_buffer, std::int64_t n, const SgdStep& h,
              void* stream) {
  if (h.momentum != 0.0f && !momentum_buffer) throw std::invalid_argument("sgd_step: momentum needs a buffer");
  COMMTUNE_DISPATCH(sgd_step, param, grad, momentum_buffer, n, h);
}

void adam_step(Device device, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n,
               const AdamStep& h, void* stream) {
  COMMTUNE_DISPATCH(adam_step, param, grad, exp_avg, exp_avg_sq, n, h);
}

void adam_moments(const float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n,
                  const AdamStep& h) {
  cpu::adam_moments(param, grad, exp_avg, exp_avg_sq, n, h);
}

void adam_apply(float* param, const float* exp_avg, const float* root, std::int64_t n, const AdamStep& h) {
  cpu::adam_apply(param, exp_avg, root, n, h);
}

void sum_bf16_rows(Device device, const std::uint16_t* rows, std::int64_t row_count, std::int64_t n, std::uint16_t* out,
                   void* stream) {
  COMMTUNE_DISPATCH(sum_bf16_rows, rows, row_count, n, out);
}

void add_into_both(Device device, float* gradient, float* error, std::int64_t n, void* stream) {
  COMMTUNE_DISPATCH(add_into_both, gradient, error, n);
}

double subtract_and_square_sum(Device device, float* error, const float* approximation, std::int64_t n, void* stream) {
  COMMTUNE_DISPATCH(subtract_and_square_sum, error, approximation, n);
}

void onebit_signs(Device device, const float* x, std::int64_t n, std::uint32_t* words, void* stream) {
  COMMTUNE_DISPATCH(onebit_signs, x, n, words);
}

void onebit_unpack_add(Device device, const std::uint32_t* words, std::int64_t n, float scale, float weight, float* out,
                       void* stream) {
  COMMTUNE_DISPATCH(onebit_unpack_add, words, n, scale, weight, out);
}

void gather_scaled(Device device, const float* x, const std::uint32_t* indices, std::int64_t k, float scale,
                   float* values, void* stream) {
  COMMTUNE_DISPATCH(gather_scaled, x, indices, k, scale, values);
}

void scatter_add(Device device, const std::uint32_t* indices, const float* values, std::int64_t k, float weight,
                 float* out, void* stream) {
  COMMTUNE_DISPATCH(scatter_add, indices, values, k, weight, out);
}

void nesterov_fold(Device device, float* x, float* momentum, std::int64_t n, float mu, void* stream) {
  COMMTUNE_DISPATCH(nesterov_fold, x, momentum, n, mu);
}

void onebit_scale(Device device, const float* x, std::int64_t n, bool scaled, float* partial, float* scale,
                  void* stream) {
  COMMTUNE_DISPATCH(onebit_scale, x, n, scaled, partial, scale);
}

void dithering_levels(Device device, const float* x, std::int64_t first, std::int64_t count, float inverse,
                      const DitheringOptions& options, std::uint64_t key, std::uint8_t* q, void* stream) {
  COMMTUNE_DISPATCH(dithering_levels, x, first, count, inverse, options, key, q);
}

}  // namespace commtune::kernels

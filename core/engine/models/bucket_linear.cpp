#include "core/engine/models/bucket_linear.h"

#include <ATen/ExpandUtils.h>
#include <torch/autograd.h>

#include "core/engine/ddp/gradient_destination.h"

namespace commtune {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// at::addmm(bias, input, weight_t), backward included, as PyTorch (1.13 and 2.11)
// computes it for a row-major input and weight_t = weight.t()
// (mm_mat1_backward, mm_mat2_backward). The inputs come in addmm's order and
// weight_t is made outside, so autograd's graph has PyTorch's shape (the
// weight's gradient passes through a transpose node): gradients become ready
// in the same order, and the rebuilt buckets match DDP's.
struct AddmmFunction : torch::autograd::Function<AddmmFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& bias, const at::Tensor& input,
                            const at::Tensor& weight_t, std::int64_t weight_key) {
    ctx->save_for_backward({input, weight_t});
    ctx->saved_data["weight"] = weight_key;
    return at::addmm(bias, input, weight_t);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& input = saved[0];
    const auto& weight_t = saved[1];
    const auto& grad = grads[0];
    at::Tensor grad_bias, grad_input, grad_weight_t;
    if (ctx->needs_input_grad(0)) {
      const std::int64_t outputs = grad.size(1);
      grad_bias = at::sum_to(grad, at::IntArrayRef(&outputs, 1));
    }
    if (ctx->needs_input_grad(1)) grad_input = grad.mm(weight_t.t());
    if (ctx->needs_input_grad(2)) {
      auto into = gradient_destination(reinterpret_cast<const c10::TensorImpl*>(ctx->saved_data["weight"].toInt()));
      if (!into.tensor.defined())
        grad_weight_t = grad.t().mm(input).t();
      else if (into.scale == 1.0)
        grad_weight_t = at::mm_out(into.tensor, grad.t(), input).t();
      else  // BLAS's alpha: a power of two, the same value as scaling the product afterwards
        grad_weight_t = at::addmm_out(into.tensor, into.tensor, grad.t(), input, 0.0, into.scale).t();
    }
    return {std::move(grad_bias), std::move(grad_input), std::move(grad_weight_t), at::Tensor()};
  }
};

}  // namespace

at::Tensor BucketLinearImpl::forward(const at::Tensor& input) {
  // at::linear's arithmetic, which PyTorch's nn.Linear calls (the C++
  // frontend's functional linear, behind torch::nn::Linear, multiplies a 3-D
  // input with matmul and adds the bias afterwards: other roundings under
  // MKL). at::linear takes a row-major matrix, or a contiguous batch of them
  // (its rows flattened, as at::linear does), as one addmm: the backward above.
  const bool rows = (input.dim() == 2 || input.dim() == 3) && input.is_contiguous() && weight.is_contiguous() &&
                    bias.defined();
  if (!rows || !at::GradMode::is_enabled() || !weight.requires_grad()) return at::linear(input, weight, bias);
  const auto key = reinterpret_cast<std::int64_t>(weight.unsafeGetTensorImpl());
  if (input.dim() == 2) return AddmmFunction::apply(bias, input, weight.t(), key);
  const auto output = AddmmFunction::apply(bias, input.reshape({-1, input.size(-1)}), weight.t(), key);
  return output.view({input.size(0), input.size(1), output.size(1)});
}

}  // namespace commtune

// torch::nn::Linear whose backward computes the weight's gradient straight
// into the reducer's gradient buffer (core/engine/ddp/gradient_destination.h), where
// torch::nn::Linear's would go to a new tensor for the reducer to copy (and
// scale: that factor is a power of two, and folds into the product exactly).
// Parameters, names and initialisation are torch::nn::Linear's, the
// arithmetic is PyTorch's nn.Linear's (at::linear): the forward is the same
// addmm (over a 3-D input's rows flattened, as at::linear takes them) and the
// gradients the same products PyTorch's addmm backward computes, so runs stay
// bit for bit those of PyTorch's DDP.
// Include only from model .cpp files: it pulls in torch::nn.
#pragma once

#include <torch/nn/modules/linear.h>

namespace commtune {

class BucketLinearImpl : public torch::nn::LinearImpl {
 public:
  using LinearImpl::LinearImpl;
  at::Tensor forward(const at::Tensor& input);
};
TORCH_MODULE(BucketLinear);

}  // namespace commtune

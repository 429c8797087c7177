// A small convolutional network (conv layers are what PowerSGD compresses best):
//   conv1 3x3 -> ReLU -> maxpool 2 -> conv2 3x3 -> ReLU -> maxpool 2 -> fc1 -> ReLU -> fc2
#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>

#include "core/engine/models/bucket_linear.h"
#include "core/engine/models/builtin_models.h"
#include "core/engine/models/torch_module_model.h"

namespace commtune {

namespace {

struct CnnOptions {
  std::int64_t width = 16;
  std::int64_t hidden = 128;
  static Schema<CnnOptions> schema() {
    return Schema<CnnOptions>()
        .integer("width", &CnnOptions::width, {1, 1024}, "channels", "channels of conv1 (conv2 has twice as many)")
        .integer("hidden", &CnnOptions::hidden, {1, 1 << 16}, "units", "width of the fully connected layer");
  }
};

class CnnImpl : public torch::nn::Module {
 public:
  CnnImpl(const DataSpec& spec, const CnnOptions& o) {
    const auto channels = spec.input_shape[0], height = spec.input_shape[1], width = spec.input_shape[2];
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, o.width, 3).padding(1)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.width, 2 * o.width, 3).padding(1)));
    fc1_ = register_module("fc1", BucketLinear(2 * o.width * (height / 4) * (width / 4), o.hidden));
    fc2_ = register_module("fc2", BucketLinear(o.hidden, spec.num_classes));
  }
  at::Tensor forward(const at::Tensor& input) {
    auto x = at::max_pool2d(conv1_->forward(input).relu_(), {2, 2});
    x = at::max_pool2d(conv2_->forward(x).relu_(), {2, 2});
    return fc2_->forward(fc1_->forward(x.flatten(1)).relu_());
  }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  BucketLinear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace

void register_cnn(ModelRegistry& registry) {
  registry.add<CnnOptions>("cnn", "two conv layers with max pooling and two fully connected layers",
                           [](const CnnOptions& o, const DataSpec& spec) {
                             require_task("cnn", spec, Task::Classification, false);
                             if (spec.input_shape.size() != 3 || spec.input_shape[1] < 4 || spec.input_shape[2] < 4)
                               throw ConfigError("model.name",
                                                 "model 'cnn' needs image inputs [C, H, W] of at least "
                                                 "4x4; the dataset gives " +
                                                     spec.describe());
                             return wrap_module(Cnn(spec, o));
                           });
}

}  // namespace commtune

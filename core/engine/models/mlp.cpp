// A multilayer perceptron over flattened inputs:
//   hidden.i: Linear -> ReLU (layers times), output: Linear
#include <torch/nn/modules/container/modulelist.h>

#include "core/engine/models/bucket_linear.h"
#include "core/engine/models/builtin_models.h"
#include "core/engine/models/torch_module_model.h"

namespace commtune {

namespace {

struct MlpOptions {
  std::int64_t hidden = 1024;
  std::int64_t layers = 2;
  static Schema<MlpOptions> schema() {
    return Schema<MlpOptions>()
        .integer("hidden", &MlpOptions::hidden, {1, 1 << 16}, "units", "width of each hidden layer")
        .integer("layers", &MlpOptions::layers, {0, 64}, "", "number of hidden layers");
  }
};

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(std::int64_t inputs, const MlpOptions& o, std::int64_t outputs) {
    hidden_ = register_module("hidden", torch::nn::ModuleList());
    std::int64_t width = inputs;
    for (std::int64_t i = 0; i < o.layers; ++i) {
      hidden_->push_back(BucketLinear(width, o.hidden));
      width = o.hidden;
    }
    output_ = register_module("output", BucketLinear(width, outputs));
  }
  at::Tensor forward(const at::Tensor& input) {
    auto x = input.flatten(1);
    for (const auto& layer : *hidden_) x = layer->as<BucketLinearImpl>()->forward(x).relu_();
    return output_->forward(x);
  }

 private:
  torch::nn::ModuleList hidden_{nullptr};
  BucketLinear output_{nullptr};
};
TORCH_MODULE(Mlp);

}  // namespace

void register_mlp(ModelRegistry& registry) {
  registry.add<MlpOptions>("mlp", "multilayer perceptron with ReLU over the flattened input",
                           [](const MlpOptions& o, const DataSpec& spec) {
                             require_task("mlp", spec, Task::Classification, false);
                             std::int64_t inputs = 1;
                             for (auto d : spec.input_shape) inputs *= d;
                             return wrap_module(Mlp(inputs, o, spec.num_classes));
                           });
}

}  // namespace commtune

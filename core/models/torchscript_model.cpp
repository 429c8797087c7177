// A user's TorchScript module (torch.jit.script(model).save(path)): trained like
// the built-ins, on any dataset whose samples its forward accepts.
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <filesystem>

#include "core/io/input_file.h"
#include "core/models/builtin_models.h"

namespace commtune {

namespace {

struct TorchScriptOptions {
  std::string path;
  static Schema<TorchScriptOptions> schema() {
    return Schema<TorchScriptOptions>().text(
        "path", &TorchScriptOptions::path,
        "a TorchScript file whose forward maps a batch to logits [batch, classes] (or [batch, time, vocab])");
  }
};

class TorchScriptModel final : public Model {
 public:
  explicit TorchScriptModel(torch::jit::Module module) : module_(std::move(module)) {}
  at::Tensor forward(const at::Tensor& input) override {
    auto out = module_.forward({input});
    if (!out.isTensor()) throw std::runtime_error("the TorchScript model's forward must return one tensor of logits");
    return out.toTensor();
  }
  NamedTensors named_parameters() override {
    NamedTensors out;
    for (const auto& item : module_.named_parameters(/*recurse=*/true))
      if (item.value.requires_grad()) out.emplace_back(item.name, item.value);
    return out;
  }
  NamedTensors named_buffers() override {
    NamedTensors out;
    for (const auto& item : module_.named_buffers(/*recurse=*/true)) out.emplace_back(item.name, item.value);
    return out;
  }
  void to(const c10::Device& device) override { module_.to(device); }
  void train(bool on) override { module_.train(on); }

 private:
  torch::jit::Module module_;
};

}  // namespace

void register_torchscript_model(ModelRegistry& registry) {
  registry.add<TorchScriptOptions>(
      "torchscript", "any TorchScript module file; pair it with a dataset its forward accepts",
      [](const TorchScriptOptions& o, const DataSpec&) -> std::unique_ptr<Model> {
        if (o.path.empty()) throw ConfigError("model.path", "set the TorchScript file to train");
        if (const auto problem = input_file_problem(o.path); !problem.empty()) throw ConfigError("model.path", problem);
        try {
          return std::make_unique<TorchScriptModel>(torch::jit::load(o.path));
        } catch (const c10::Error& e) {
          throw ConfigError("model.path",
                            o.path + " is not a loadable TorchScript file: " + e.what_without_backtrace());
        }
      });
}

}  // namespace commtune

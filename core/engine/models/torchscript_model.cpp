// A user's TorchScript module (torch.jit.script(model).save(path)): trained like
// the built-ins, on any dataset whose samples its forward accepts.
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/version.h>

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "core/tuner/io/error_text.h"
#include "core/tuner/io/zip_directory.h"
#include "core/engine/models/builtin_models.h"

namespace commtune {

namespace {

struct TorchScriptOptions {
  std::string path;
  double max_gib = 2;
  static Schema<TorchScriptOptions> schema() {
    return Schema<TorchScriptOptions>()
        .text("path", &TorchScriptOptions::path,
              "a TorchScript file whose forward maps a batch to logits [batch, classes] (or [batch, time, vocab])")
        .real("max_gib", &TorchScriptOptions::max_gib, Range::above(0), "GiB",
              "the most the file's entries may hold, decompressed, checked from its zip directory before it is "
              "loaded: every rank loads it whole");
  }
};

class TorchScriptModel final : public Model {
 public:
  explicit TorchScriptModel(torch::jit::Module module) : module_(std::move(module)) {}
  at::Tensor forward(const at::Tensor& input) override {
    auto out = module_.forward({input});
    if (!out.isTensor())
      throw ConfigError("model", "the TorchScript model's forward returns " + out.type()->annotation_str() +
                                     ", not one tensor of logits [batch, classes] (or [batch, time, vocab]): save a "
                                     "module whose forward returns the logits (e.g. a wrapper returning "
                                     "outputs[\"logits\"])");
    return out.toTensor();
  }
  // Each tensor once, under its first name, as PyTorch's named_parameters
  // gives them: a tied weight (an embedding shared with the output layer) is
  // one parameter that two submodules hold.
  NamedTensors named_parameters() override {
    NamedTensors out;
    std::unordered_set<const c10::TensorImpl*> seen;
    for (const auto& item : module_.named_parameters(/*recurse=*/true))
      if (item.value.requires_grad() && seen.insert(item.value.unsafeGetTensorImpl()).second)
        out.emplace_back(item.name, item.value);
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

// Why a TorchScript file does not load, in one line naming it: an operator
// this libtorch lacks (the file comes from a newer PyTorch), else
// libtorch's own first line (a file format too new, a damaged archive).
std::string load_problem(const std::string& path, const std::string& what) {
  constexpr std::string_view kUnknown = "Unknown builtin op: ";
  if (const auto at = what.find(kUnknown); at != std::string::npos) {
    auto op = what.substr(at + kUnknown.size());
    op = op.substr(0, op.find_first_of(" \n"));
    if (!op.empty() && op.back() == '.') op.pop_back();
    return path + " calls " + op + ", an operator this engine's libtorch " TORCH_VERSION
                  " does not have: it was saved by a newer PyTorch; save it with PyTorch " TORCH_VERSION " or older";
  }
  return path + " is not a TorchScript file this engine's libtorch " TORCH_VERSION " loads: " + one_line_error(what);
}

// Refuses a file whose entries would take more than `max_gib` to load (a
// zip bomb: 2 MB that inflate to 2 GiB), or whose zip directory is damaged,
// before libtorch allocates any of it.
void check_archive(const std::string& path, double max_gib) {
  std::optional<ZipDirectory> directory;
  try {
    directory = checked_pytorch_archive(path);
  } catch (const std::runtime_error& e) {
    throw ConfigError("model.path", e.what());
  }
  if (!directory) throw ConfigError("model.path", path + " is not a TorchScript file (not a zip archive)");
  // What else PyTorch saves in a zip archive, named for what it is.
  const auto holds = [&](std::string_view suffix) {
    return std::any_of(directory->entries.begin(), directory->entries.end(), [&](const ZipEntry& e) {
      return e.name.size() >= suffix.size() && e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
  };
  if (!holds("/constants.pkl")) {
    if (holds("/archive_format") && holds("/models/model.json"))
      throw ConfigError("model.path",
                        path + " is a torch.export ExportedProgram (.pt2), which cannot be trained from C++ "
                               "(TorchScript can): save the module itself with torch.jit.script(model).save(path)");
    if (holds("/data.pkl"))
      throw ConfigError("model.path", path + " is a torch.save file (weights or tensors), not a TorchScript module: "
                                             "save the module with torch.jit.script(model).save(path); weights go "
                                             "to weights.init");
  }
  const auto limit = static_cast<std::uint64_t>(max_gib * double(std::uint64_t{1} << 30));
  if (directory->uncompressed_bytes > limit) {
    const auto largest = std::max_element(
        directory->entries.begin(), directory->entries.end(),
        [](const ZipEntry& a, const ZipEntry& b) { return a.uncompressed_bytes < b.uncompressed_bytes; });
    throw ConfigError("model.max_gib", path + " holds " + std::to_string(directory->uncompressed_bytes) +
                                           " bytes decompressed (" + largest->name + ": " +
                                           std::to_string(largest->uncompressed_bytes) + " from " +
                                           std::to_string(largest->compressed_bytes) + " in the file), more than the " +
                                           c10::str(max_gib) + " GiB a model may take: raise model.max_gib");
  }
}

}  // namespace

void register_torchscript_model(ModelRegistry& registry) {
  registry.add<TorchScriptOptions>(
      "torchscript", "any TorchScript module file; pair it with a dataset its forward accepts",
      [](const TorchScriptOptions& o, const DataSpec&) -> std::unique_ptr<Model> {
        if (o.path.empty()) throw ConfigError("model.path", "set the TorchScript file to train");
        check_archive(o.path, o.max_gib);
        try {
          return std::make_unique<TorchScriptModel>(torch::jit::load(o.path));
        } catch (const c10::Error& e) {
          throw ConfigError("model.path", load_problem(o.path, e.what_without_backtrace()));
        } catch (const std::exception& e) {  // the TorchScript compiler's ErrorReport
          throw ConfigError("model.path", load_problem(o.path, e.what()));
        }
      });
}

}  // namespace commtune

#include "core/models/weights_file.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/schema/param_schema.h"

namespace commtune {

void save_weights(const std::string& path, const NamedTensors& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().cpu().contiguous());
  const auto bytes = torch::jit::pickle_save(dict);
  const auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);  // a reader never sees half a file
}

NamedTensors read_weights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(bytes);
  } catch (const c10::Error& e) {
    throw std::runtime_error(path + " is not a weights file this libtorch reads (" + e.what_without_backtrace() +
                             "); save it with torch.save(dict(model.state_dict()), path)");
  }
  if (!value.isGenericDict())
    throw std::runtime_error(path + " does not hold a dict of tensors; save it with torch.save(dict(model.state_dict()), path)");
  NamedTensors out;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      throw std::runtime_error(path + " holds an entry that is not name -> tensor");
    out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return out;
}

void load_weights_into(const NamedTensors& parameters, const NamedTensors& weights, const std::string& path,
                       const std::string& field) {
  std::map<std::string, at::Tensor> by_name(weights.begin(), weights.end());
  for (const auto& [name, p] : parameters) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw ConfigError(field, path + " has no entry for parameter '" + name + "'");
    if (it->second.sizes() != p.sizes())
      throw ConfigError(field, path + ": '" + name + "' has shape " + c10::str(it->second.sizes()) +
                                   ", the model expects " + c10::str(p.sizes()));
    at::NoGradGuard no_grad;
    p.copy_(it->second);
  }
}

}  // namespace commtune

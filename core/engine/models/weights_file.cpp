#include "core/engine/models/weights_file.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <map>

#include "core/engine/io/pickle_file.h"

#include "core/tuner/schema/param_schema.h"

namespace commtune {

void save_weights(const std::string& path, const NamedTensors& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) dict.insert(name, t.detach().cpu().contiguous());
  write_pickle_file(path, dict);
}

NamedTensors read_weights(const std::string& path) {
  c10::IValue value;
  try {
    value = read_pickle_file(path);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + "; save weights with torch.save(dict(model.state_dict()), path)");
  }
  if (!value.isGenericDict())
    throw std::runtime_error(
        path + " does not hold a dict of tensors; save it with torch.save(dict(model.state_dict()), path)");
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

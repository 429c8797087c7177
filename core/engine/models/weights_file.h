// Weight files: a dict of parameter name -> tensor in PyTorch's zip format.
// PyTorch reads them with torch.load(path, weights_only=True); commtune reads
// its own files and those written by torch.save(dict(model.state_dict())).
#pragma once

#include <string>

#include "core/engine/ddp/flat_parameters.h"

namespace commtune {

void save_weights(const std::string& path, const NamedTensors& tensors);
NamedTensors read_weights(const std::string& path);
// Copies weights into parameters by name; shapes must match and every
// parameter must be present. Errors name the file, the parameter and `field`.
void load_weights_into(const NamedTensors& parameters, const NamedTensors& weights, const std::string& path,
                       const std::string& field);

}  // namespace commtune

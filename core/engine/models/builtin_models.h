// Registration of the models that ship with commtune, one function per file.
#pragma once

#include "core/engine/models/model.h"

namespace commtune {
void register_mlp(ModelRegistry& registry);
void register_cnn(ModelRegistry& registry);
void register_transformer_lm(ModelRegistry& registry);
void register_torchscript_model(ModelRegistry& registry);
}  // namespace commtune

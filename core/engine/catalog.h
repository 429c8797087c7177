// Every registered component by section: the built-ins, and whatever plugins
// add. The config, the CLI and the GUI all read their choices from here.
#pragma once

#include "core/engine/compress/compressor.h"
#include "core/engine/data/data_loader.h"
#include "core/engine/data/dataset.h"
#include "core/engine/hooks/default_hooks.h"
#include "core/engine/models/model.h"
#include "core/engine/optim/optimizer.h"

namespace commtune {

struct Catalog {
  ModelRegistry models{"model", "mlp"};
  DatasetRegistry datasets{"data", "synthetic", LoaderOptions::schema().erase()};
  OptimizerRegistry optimizers{"optimizer", "sgd", OptimizerCommon::schema().erase()};
  HookRegistry hooks{"hook", "allreduce", HookCommonOptions::schema().erase()};
  // The byteps hook's compressors (process-wide: its schema reads their names).
  CompressorRegistry& compressors = compressor_registry();
};

// The process-wide catalog, with the built-ins registered on first use.
Catalog& catalog();

class RunConfig;
// The shapes of the parameters of a configuration's model, in its order,
// from a model built on the CPU for its data (remembered per model, data and
// seed). Empty when the model or data cannot be built here (a missing file).
std::vector<std::vector<std::int64_t>> parameter_shapes(const RunConfig& config);

}  // namespace commtune

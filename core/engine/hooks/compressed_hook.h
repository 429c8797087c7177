// The byteps hook. byteps_aggregation=server is BytePS's algorithm
// (byteps_server.h). allgather: each rank packs its whole bucket with a
// compressor (core/compress), the payloads are allgathered (they cannot be
// summed on the wire), and every rank decodes them in rank order and
// averages, so all ranks hold the same bits - no server stage, so not
// BytePS's results, but one collective, a device path and two levels.
#pragma once

#include "core/engine/hooks/default_hooks.h"

namespace commtune {

void register_compressed_hooks(HookRegistry& registry);
// Registers the byteps hook again, so its byteps_compressor_type lists the
// compressors plugins added since.
void refresh_compressed_hooks(HookRegistry& registry);

}  // namespace commtune

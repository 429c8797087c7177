// The compressed collective as a hook: each rank packs its bucket with a
// BytePS-style compressor (core/compress), the packed payloads are
// allgathered (they cannot be summed on the wire), and every rank decodes
// them in rank order and averages, so all ranks hold the same bits.
#pragma once

#include "core/hooks/default_hooks.h"

namespace commtune {

void register_compressed_hooks(HookRegistry& registry);
// Registers the byteps hook again, so its byteps_compressor_type lists the
// compressors plugins added since.
void refresh_compressed_hooks(HookRegistry& registry);

}  // namespace commtune

// BytePS's compressed push-pull on c10d: each rank compresses every
// partition of every large parameter's gradient (momentum, error feedback,
// compressor, as a BytePS worker), the payloads are allgathered, and a
// server stage that every rank runs alike decodes them in rank order, sums
// them and compresses the sum with the server's own error feedback; each
// rank then decodes that, as a worker decodes its pull. Parameters under
// byteps_min_compress_bytes are summed uncompressed and get Nesterov
// momentum after the pull (BytePS's MXNet NagAdapter). Memories belong to a
// parameter partition, not to a bucket position. docs/compressors.md says
// what matches BytePS bit for bit.
#pragma once

#include <memory>

#include "core/engine/compress/compressor.h"
#include "core/engine/hooks/hook_env.h"

namespace commtune {

std::unique_ptr<CommHook> make_byteps_server_hook(const CompressorOptions& options, HookEnv& env);

}  // namespace commtune

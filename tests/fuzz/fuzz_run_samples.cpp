// libFuzzer target: a run's stored step profile (runs.samples, read by every
// prediction from a store someone else may have written). Bytes that decode
// must be one whole profile - every series as long as its steps - and must
// encode to the same bytes (the encoding is canonical); a count that lies
// must be refused before anything is allocated for it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tuner/netmodel/run_samples.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto s = commtune::RunSamples::decode(bytes, 1, 2);
  if (!s) return 0;
  if (s->world_size != 2) __builtin_trap();
  const auto n = s->steps.size();
  if (n == 0) __builtin_trap();
  for (const auto* series : {&s->data, &s->forward, &s->backward, &s->pure_backward, &s->optimizer, &s->hook,
                             &s->hook_inline, &s->total, &s->wire_bytes, &s->uncompressed_bytes})
    if (series->size() != n) __builtin_trap();
  for (const auto* buckets : {&s->ready, &s->chain, &s->work})
    for (const auto& [bucket, series] : *buckets)
      if (series.size() != n) __builtin_trap();
  for (const auto& c : s->collectives)
    if (c.bytes.size() != n || c.calls.size() != n || c.seconds.size() != n) __builtin_trap();
  if (s->encode() != bytes) __builtin_trap();
  return 0;
}

// A stand-in for commtune-worker that does no training: it sends as many
// step records, each with hook statistics for several buckets, as the
// launcher can take, then ends its run. store_bench starts it through the
// real launcher to measure the path from a worker's event to a stored row.
//
//   COMMTUNE_EMIT_STEPS   steps per rank (default 20000)
//   COMMTUNE_EMIT_BUCKETS buckets per step (default 2)
//   COMMTUNE_EMIT_RATE    steps per second per rank (default 0: as fast as it can)
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/tuner/events/event_writer.h"

using namespace commtune::events;

namespace {
long env_number(const char* name, long fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::strtol(text, nullptr, 10) : fallback;
}
}  // namespace

int main() {
  const int rank = static_cast<int>(env_number("RANK", 0));
  const int world_size = static_cast<int>(env_number("WORLD_SIZE", 1));
  const long steps = env_number("COMMTUNE_EMIT_STEPS", 20000);
  const long buckets = env_number("COMMTUNE_EMIT_BUCKETS", 2);
  const long rate = env_number("COMMTUNE_EMIT_RATE", 0);
  auto writer = EventWriter::from_environment(Hello{kProtocolVersion, static_cast<std::uint32_t>(rank),
                                                    static_cast<std::uint32_t>(world_size),
                                                    static_cast<std::uint32_t>(::getpid())});
  if (!writer) return 2;
  writer->message({{"kind", "run_start"}, {"rank", rank}, {"first_step", 0}});
  StepRecord record;
  record.times = {1e-4, 2e-3, 3e-3, 1e-3, 2e-4, 5e-4, 6.7e-3};
  record.wire_bytes = 1 << 20;
  record.uncompressed_bytes = 4 << 20;
  record.stats = {{"hook_inline_s", 1e-4}, {"compression_rate", 4.0}, {"numel_before", 1e6}, {"numel_after", 2.5e5}};
  for (std::uint32_t b = 0; b < buckets; ++b)
    for (const char* name : {"comm.allreduce.bytes", "comm.allreduce.calls", "comm.allreduce.seconds", "ready_s",
                             "compression_rate", "numel_before", "numel_after", "residual_norm"})
      record.bucket_stats.push_back({b, name, 1.0 + b});
  const auto start = std::chrono::steady_clock::now();
  for (long s = 0; s < steps; ++s) {
    if (rate > 0) std::this_thread::sleep_until(start + std::chrono::microseconds(1000000 * s / rate));
    record.step = s;
    record.loss = 2.0 / (1.0 + static_cast<double>(s));
    writer->step(record);
  }
  writer->message({{"kind", "run_end"}, {"rank", rank}, {"wall_s", 0.0}});
  writer->flush();
  return 0;
}

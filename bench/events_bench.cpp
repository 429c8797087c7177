// The worker -> launcher event stream: step records through a socket pair,
// encoded on the training thread, written by the writer thread, decoded by a
// reader, as in a real run. Throughput next to memcpy of the same bytes, and
// the cost a step pays on the training thread.
//
//   build/bench/events_bench
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/bench_timing.h"
#include "core/tuner/events/event_codec.h"
#include "core/tuner/events/event_writer.h"

using namespace commtune::events;

int main() {
  constexpr int kSteps = 200000;
  StepRecord record;
  record.loss = 1.25;
  record.times = {1e-4, 2e-3, 3e-3, 1e-3, 2e-4, 5e-4, 6.7e-3};
  record.wire_bytes = 4 << 20;
  record.uncompressed_bytes = 8 << 20;
  record.stats = {{"compression_rate", 4.0}, {"numel_before", 1e6}, {"numel_after", 2.5e5}, {"residual_norm", 0.1}};
  for (std::uint32_t b = 0; b < 4; ++b) record.bucket_stats.push_back({b, "rate", 4.0});

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 1;
  std::atomic<long long> received{0};
  std::atomic<long long> bytes{0};
  std::thread reader([&] {
    Decoder decoder;
    std::vector<char> buffer(1 << 16);
    while (true) {
      const auto n = ::read(fds[1], buffer.data(), buffer.size());
      if (n <= 0) break;
      bytes += n;
      for (const auto& e : decoder.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n))))
        if (e.step()) ++received;
    }
  });

  double producer_s = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    EventWriter writer(fds[0], Hello{kProtocolVersion, 0, 1, 1});
    for (int s = 0; s < kSteps; ++s) {
      record.step = s;
      const auto t = std::chrono::steady_clock::now();
      writer.step(record);
      producer_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    }
  }  // flushes and closes the socket
  reader.join();
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<char> a(static_cast<std::size_t>(bytes.load())), b(a.size());
  const double copy_s = commtune::bench::median_seconds([&] { std::memcpy(b.data(), a.data(), a.size()); });

  const double stream_bw = static_cast<double>(bytes) / total_s, copy_bw = static_cast<double>(bytes) / copy_s;
  std::printf("%d step records (4 stats, 4 bucket stats each), %.1f MB encoded, %lld decoded\n", kSteps,
              static_cast<double>(bytes) / 1e6, received.load());
  std::printf("end to end: %.0f records/s, %.1f MB/s; memcpy of the same bytes: %.1f MB/s; ratio %.3f\n",
              kSteps / total_s, stream_bw / 1e6, copy_bw / 1e6, stream_bw / copy_bw);
  std::printf("training-thread cost: %.0f ns per step record (%.4f%% of a 1 ms step)\n", 1e9 * producer_s / kSteps,
              100.0 * producer_s / kSteps / 1e-3);
  return received.load() == kSteps ? 0 : 1;
}

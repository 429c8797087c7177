// libFuzzer target: an event file as `import` and `summarize` read it, up to
// the run's summary. A damaged or foreign file must end in one
// std::runtime_error that names it: never another exception, a crash, or an
// allocation its size does not justify.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/tuner/launch/event_files.h"
#include "core/tuner/launch/run_report.h"
#include "tests/fuzz/event_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("commtune-fuzz-" + std::to_string(::getpid()) + ".ctev")).string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  commtune::EventFilesOptions options;
  options.paths = {path};
  std::unique_ptr<commtune::RunSummary> summary;
  try {
    const auto run = commtune::read_event_files(
        options, {}, [&](const nlohmann::json&, int world_size) -> std::vector<commtune::EventSubscriber*> {
          summary = std::make_unique<commtune::RunSummary>(world_size);
          return {summary.get()};
        });
    summary->to_json(run.outcome, run.config);
  } catch (const std::runtime_error&) {
  }
  return 0;
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  return event_fuzz::mutate(data, size, max_size, seed);
}

#include "core/tuner/launch/gpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "core/tuner/schema/param_schema.h"

namespace commtune {

namespace {

int gpus_present() {
  namespace fs = std::filesystem;
  std::error_code error;
  int from_proc = 0, from_dev = 0;
  for (const auto& entry : fs::directory_iterator("/proc/driver/nvidia/gpus", error)) {
    (void)entry;
    ++from_proc;
  }
  for (const auto& entry : fs::directory_iterator("/dev", error)) {
    const auto name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++from_dev;
  }
  return std::max(from_proc, from_dev);
}

// How many GPUs CUDA_VISIBLE_DEVICES leaves of `present`: its entries up to
// the first that names none (an index out of range, text that is not one,
// as CUDA reads it; a GPU-... or MIG-... UUID counts as one GPU).
int narrowed(std::string_view list, int present) {
  int count = 0;
  std::size_t start = 0;
  while (start <= list.size() && count < present) {
    const auto end = std::min(list.find(',', start), list.size());
    auto item = list.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    if (item.empty()) break;
    const bool uuid = item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0;
    if (!uuid) {
      if (item.find_first_not_of("0123456789") != std::string_view::npos || item.size() > 6) break;
      if (std::stoi(std::string(item)) >= present) break;
    }
    ++count;
    start = end + 1;
  }
  return count;
}

}  // namespace

int visible_gpus() {
#if defined(COMMTUNE_TORCH_HAS_CUDA)
  const int present = gpus_present();
  if (const char* list = std::getenv("CUDA_VISIBLE_DEVICES"); list) return narrowed(list, present);
  return present;
#else
  return 0;
#endif
}

int resolve_world_size(std::int64_t world_size, const std::string& device) {
  if (world_size > 0) return static_cast<int>(world_size);
  const int gpus = visible_gpus();
  if (device != "cpu" && gpus > 0) return gpus;
  if (device == "cuda") throw ConfigError("device", "cuda was asked for, but no CUDA device is visible");
  return 2;
}

}  // namespace commtune

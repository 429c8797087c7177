#include "core/engine/hooks/hook_env.h"

#include <numeric>

#include <time.h>

namespace commtune {

std::int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void HookStats::set(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_[name] = value;
}

void HookStats::add(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_[name] += value;
}

void HookStats::set_bucket(std::size_t bucket, const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  buckets_[{bucket, name}] = value;
}

void HookStats::take(std::vector<std::pair<std::string, double>>& step,
                     std::vector<std::tuple<std::size_t, std::string, double>>& buckets) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [name, value] : step_) step.emplace_back(name, value);
  for (auto& [key, value] : buckets_) buckets.emplace_back(key.first, key.second, value);
  step_.clear();
  buckets_.clear();
}

Schema<HookCommonOptions> HookCommonOptions::schema() {
  return Schema<HookCommonOptions>().choice(
      "wrapper", &HookCommonOptions::wrapper, {"none", "fp16", "bf16"},
      "wrap the hook in fp16_compress_wrapper or bf16_compress_wrapper: the hook sees a half-precision "
      "copy of the bucket and its result is cast back");
}

std::unique_ptr<Communicator> consecutive_group(Communicator& comm, int size, const std::string& field,
                                                const std::string& tag) {
  check_group_size(comm.size(), size, field);
  const int group = comm.rank() / size;
  std::vector<int> members(static_cast<std::size_t>(size));
  std::iota(members.begin(), members.end(), group * size);
  return comm.split(members, tag + "-" + std::to_string(size) + "-" + std::to_string(group) + "/");
}

}  // namespace commtune

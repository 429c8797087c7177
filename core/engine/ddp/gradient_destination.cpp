#include "core/engine/ddp/gradient_destination.h"

#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace commtune {

namespace {
struct Registry {
  std::mutex mutex;
  std::unordered_map<const c10::TensorImpl*, std::function<GradientDestination()>> entries;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

GradientDestination gradient_destination(const c10::TensorImpl* parameter) {
  std::function<GradientDestination()> destination;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.entries.find(parameter);
    if (it == r.entries.end()) return {};
    destination = it->second;
  }
  // Called without the registry's lock: the answer takes the reducer's.
  return destination();
}

GradientDestinationRegistration::GradientDestinationRegistration(const c10::TensorImpl* parameter,
                                                                 std::function<GradientDestination()> destination)
    : parameter_(parameter) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.entries.emplace(parameter, std::move(destination)).second)
    throw std::invalid_argument("a parameter is already given to another reducer");
}

GradientDestinationRegistration::GradientDestinationRegistration(GradientDestinationRegistration&& other) noexcept
    : parameter_(other.parameter_) {
  other.parameter_ = nullptr;
}

GradientDestinationRegistration::~GradientDestinationRegistration() {
  if (!parameter_) return;
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.entries.erase(parameter_);
}

}  // namespace commtune

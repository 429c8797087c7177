#include "core/engine/ddp/flat_parameters.h"

#include <ATen/ATen.h>

#include <numeric>
#include <stdexcept>

namespace commtune {

FlatParameters::FlatParameters(NamedTensors parameters) {
  if (parameters.empty()) throw std::invalid_argument("the model has no trainable parameters");
  const auto device = parameters.front().second.device();
  for (auto& [name, p] : parameters) {
    if (p.scalar_type() != at::kFloat)
      throw std::invalid_argument("parameter '" + name + "' is " + std::string(c10::toString(p.scalar_type())) +
                                  "; commtune trains float32 parameters");
    if (p.device() != device)
      throw std::invalid_argument("parameter '" + name + "' is on " + p.device().str() + ", others on " + device.str());
    Slot slot;
    slot.name = name;
    slot.parameter = p;
    slot.shape = p.sizes().vec();
    slot.numel = p.numel();
    slots_.push_back(std::move(slot));
    total_ += p.numel();
  }
  order_.resize(slots_.size());
  std::iota(order_.begin(), order_.end(), 0);
  values_ = at::empty({total_}, parameters.front().second.options().requires_grad(false));
  grads_ = at::zeros({total_}, values_.options());
  std::int64_t offset = 0;
  for (auto& slot : slots_) {
    slot.offset = offset;
    values_.narrow(0, offset, slot.numel).copy_(slot.parameter.detach().reshape({-1}));
    offset += slot.numel;
  }
  bind_parameters();
}

at::Tensor FlatParameters::grad_view(std::size_t i) const {
  return grads_.narrow(0, slots_[i].offset, slots_[i].numel).view(slots_[i].shape);
}

at::Tensor& FlatParameters::state(const std::string& name) {
  auto it = states_.find(name);
  if (it == states_.end()) it = states_.emplace(name, at::zeros_like(values_)).first;
  return it->second;
}

at::Tensor FlatParameters::permuted(const at::Tensor& flat, const std::vector<std::int64_t>& new_offsets) const {
  auto out = at::empty_like(flat);
  for (std::size_t i = 0; i < slots_.size(); ++i)
    out.narrow(0, new_offsets[i], slots_[i].numel).copy_(flat.narrow(0, slots_[i].offset, slots_[i].numel));
  return out;
}

void FlatParameters::relayout(const std::vector<std::size_t>& order) {
  std::vector<bool> seen(slots_.size(), false);
  if (order.size() != slots_.size()) throw std::invalid_argument("relayout: order must name every parameter once");
  std::vector<std::int64_t> new_offsets(slots_.size());
  std::int64_t offset = 0;
  for (auto i : order) {
    if (i >= slots_.size() || seen[i]) throw std::invalid_argument("relayout: order must name every parameter once");
    seen[i] = true;
    new_offsets[i] = offset;
    offset += slots_[i].numel;
  }
  values_ = permuted(values_, new_offsets);
  grads_ = permuted(grads_, new_offsets);
  for (auto& [name, state] : states_) state = permuted(state, new_offsets);
  for (std::size_t i = 0; i < slots_.size(); ++i) slots_[i].offset = new_offsets[i];
  order_ = order;
  bind_parameters();
}

void FlatParameters::bind_parameters() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& slot = slots_[i];
    slot.parameter.set_data(values_.narrow(0, slot.offset, slot.numel).view(slot.shape));
    if (slot.parameter.grad().defined()) slot.parameter.mutable_grad() = grad_view(i);
  }
}

NamedTensors FlatParameters::unflatten(const at::Tensor& flat) const {
  NamedTensors out;
  out.reserve(slots_.size());
  for (const auto& slot : slots_)
    out.emplace_back(slot.name, flat.narrow(0, slot.offset, slot.numel).view(slot.shape).clone());
  return out;
}

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& order,
                                                     const std::vector<std::int64_t>& bytes,
                                                     const std::vector<std::int64_t>& limits) {
  if (limits.empty()) throw std::invalid_argument("assign_buckets: no size limits");
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> current;
  std::int64_t size = 0;
  std::size_t limit = 0;
  for (auto i : order) {
    current.push_back(i);
    size += bytes.at(i);
    if (size >= limits[limit]) {
      buckets.push_back(std::move(current));
      current.clear();
      size = 0;
      limit = std::min(limit + 1, limits.size() - 1);
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace commtune

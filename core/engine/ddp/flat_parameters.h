// The one owner of parameter storage. Every trainable parameter becomes a view
// into a flat buffer laid out in bucket order; gradients and optimizer state
// live in flat buffers with the same layout. Buckets are then plain slices of
// the gradient buffer, and the optimizer updates all parameters in one pass.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace commtune {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class FlatParameters {
 public:
  // Takes the trainable parameters in model order (float32, one device).
  explicit FlatParameters(NamedTensors parameters);

  std::size_t count() const { return slots_.size(); }
  const std::string& name(std::size_t i) const { return slots_[i].name; }
  const at::Tensor& parameter(std::size_t i) const { return slots_[i].parameter; }
  std::int64_t numel(std::size_t i) const { return slots_[i].numel; }
  const std::vector<std::int64_t>& shape(std::size_t i) const { return slots_[i].shape; }
  // Position of parameter i in the flat buffers under the current layout.
  std::int64_t offset(std::size_t i) const { return slots_[i].offset; }
  std::int64_t total_numel() const { return total_; }
  // Parameter indices in flat-buffer order.
  const std::vector<std::size_t>& order() const { return order_; }

  const at::Tensor& values() const { return values_; }
  const at::Tensor& grads() const { return grads_; }
  // Parameter i's slice of the gradient buffer, shaped like the parameter.
  at::Tensor grad_view(std::size_t i) const;

  // A flat state buffer with the parameters' layout (optimizer moments),
  // zero-filled when first asked for; it moves with every relayout.
  at::Tensor& state(const std::string& name);
  bool has_state(const std::string& name) const { return states_.count(name) != 0; }
  const std::map<std::string, at::Tensor>& states() const { return states_; }

  // Moves every parameter, gradient and state to the layout `order`.
  void relayout(const std::vector<std::size_t>& order);

  // A parameter-order copy of a flat buffer in this layout, by name (for
  // checkpoints and dumps that must not depend on the bucket layout).
  NamedTensors unflatten(const at::Tensor& flat) const;

 private:
  struct Slot {
    std::string name;
    at::Tensor parameter;
    std::vector<std::int64_t> shape;
    std::int64_t numel = 0;
    std::int64_t offset = 0;
  };
  at::Tensor permuted(const at::Tensor& flat, const std::vector<std::int64_t>& new_offsets) const;
  void bind_parameters();

  std::vector<Slot> slots_;
  std::vector<std::size_t> order_;
  std::int64_t total_ = 0;
  at::Tensor values_;
  at::Tensor grads_;
  std::map<std::string, at::Tensor> states_;
};

// DDP's bucket assignment (c10d::compute_bucket_assignment_by_size, dense
// tensors of one dtype): walks `order`, closing a bucket once its bytes reach
// the current limit; the first bucket uses limits[0], later buckets the next
// limit, the last limit repeating.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& order,
                                                     const std::vector<std::int64_t>& bytes,
                                                     const std::vector<std::int64_t>& limits);

}  // namespace commtune

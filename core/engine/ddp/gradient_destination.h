// Where a layer's backward may compute a parameter's gradient directly: the
// reducer's slice of the gradient buffer for that parameter, while the
// reducer is waiting for it. A gradient computed there spares the reducer
// its copy into the bucket (a pass over every gradient, each step); any
// other gradient arrives as a fresh tensor and is copied as before.
#pragma once

#include <functional>

#include <ATen/core/Tensor.h>

namespace commtune {

// Where to write `parameter`'s gradient in the running backward pass: into
// `tensor` (shaped like the parameter), multiplied by `scale` (the factor the
// reducer applies on the way into the bucket: a power of two, so a layer can
// fold it into its arithmetic exactly). `tensor` is undefined where the
// gradient must go to a new tensor (no reducer waits for it). Keyed by the
// parameter's TensorImpl, which stays the same when its storage moves.
struct GradientDestination {
  at::Tensor tensor;
  double scale = 1.0;
};
GradientDestination gradient_destination(const c10::TensorImpl* parameter);

// While it lives, `destination` answers gradient_destination for `parameter`
// (the reducer holds one per parameter; a second registration of the same
// parameter throws). Movable, not copyable.
class GradientDestinationRegistration {
 public:
  GradientDestinationRegistration(const c10::TensorImpl* parameter, std::function<GradientDestination()> destination);
  ~GradientDestinationRegistration();
  GradientDestinationRegistration(GradientDestinationRegistration&& other) noexcept;
  GradientDestinationRegistration& operator=(GradientDestinationRegistration&&) = delete;
  GradientDestinationRegistration(const GradientDestinationRegistration&) = delete;
  GradientDestinationRegistration& operator=(const GradientDestinationRegistration&) = delete;

 private:
  const c10::TensorImpl* parameter_;  // null once moved from
};

}  // namespace commtune

// Optimizers over the flat parameter and gradient buffers: fused passes with
// torch.optim's arithmetic. Learning-rate warm-up is common to all.
#pragma once

#include <cstdint>

#include <ATen/core/Dict.h>

#include "core/engine/ddp/flat_parameters.h"
#include "core/engine/component_registry.h"

namespace commtune {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // A step is taken in pieces, so that each bucket's parameters can be
  // updated as soon as its gradients are reduced, while later buckets still
  // communicate: `begin_step` once, then `update` over disjoint ranges of the
  // flat buffers that together cover every element. The update is element
  // by element, so the pieces give the bits of one pass.
  virtual void begin_step(double lr) = 0;
  virtual void update(std::int64_t offset, std::int64_t numel) = 0;
  // Counters beyond the flat state buffers (which FlatParameters carries), for checkpoints.
  virtual void save_state(c10::impl::GenericDict& /*out*/) const {}
  virtual void load_state(const c10::impl::GenericDict& /*in*/) {}
};

struct OptimizerCommon {
  double lr = 0.05;
  double weight_decay = 0;
  std::int64_t warmup_steps = 0;

  static Schema<OptimizerCommon> schema();
  // The learning rate of step `step` (0-based): linear warm-up from lr/warmup
  // to lr over warmup_steps steps, then constant. The same values as
  // LambdaLR(lambda t: min(1, (t + 1) / warmup_steps)).
  double lr_at(std::int64_t step) const;
};

using OptimizerRegistry = ComponentRegistry<Optimizer, FlatParameters&, const OptimizerCommon&>;

void register_builtin_optimizers(OptimizerRegistry& registry);

}  // namespace commtune

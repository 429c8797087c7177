// Example plugin: a threshold-sparsification hook. Gradient elements whose
// magnitude is below `threshold` are dropped (set to zero) before the
// average; the bucket then goes through an ordinary allreduce. (A
// production version would send only the kept elements; this one shows the
// SDK.) tests/integration/test_plugins.py checks it against the same
// arithmetic in PyTorch.
#include <ATen/ATen.h>

#include "plugins/commtune_plugin.h"

namespace {

struct ThresholdOptions {
  double threshold = 1e-3;
  static commtune::Schema<ThresholdOptions> schema() {
    return commtune::Schema<ThresholdOptions>().real("threshold", &ThresholdOptions::threshold,
                                                     commtune::Range::at_least(0), "",
                                                     "gradient elements with |g| below this are dropped");
  }
};

class ThresholdHook final : public commtune::CommHook {
 public:
  ThresholdHook(double threshold, commtune::HookEnv& env) : threshold_(threshold), env_(env) {}
  commtune::Future run(commtune::GradBucket& bucket) override {
    auto buffer = bucket.buffer();
    const auto dropped = buffer.abs() < threshold_;
    env_.stats.set_bucket(bucket.index(), "kept_fraction", 1.0 - dropped.to(at::kDouble).mean().item<double>());
    buffer.masked_fill_(dropped, 0).div_(env_.world_size());
    return env_.comm.allreduce_sum(buffer);
  }

 private:
  double threshold_;
  commtune::HookEnv& env_;
};

void register_threshold(commtune::Catalog& catalog) {
  catalog.hooks.add<ThresholdOptions>("threshold_sparsify",
                                      "example plugin: drop gradient elements below a threshold, then average",
                                      [](const ThresholdOptions& o, commtune::HookEnv& env) {
                                        return std::make_unique<ThresholdHook>(o.threshold, env);
                                      });
}

}  // namespace

COMMTUNE_PLUGIN("threshold-sparsify example", register_threshold)

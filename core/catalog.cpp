#include "core/catalog.h"

#include "core/hooks/compressed_hook.h"
#include "core/hooks/local_sgd.h"
#include "core/hooks/slowmo.h"
#include "core/hooks/powersgd.h"

namespace commtune {

Catalog& catalog() {
  static Catalog instance = [] {
    Catalog c;
    register_builtin_models(c.models);
    register_builtin_datasets(c.datasets);
    register_builtin_optimizers(c.optimizers);
    register_default_hooks(c.hooks);
    register_powersgd_hooks(c.hooks);
    register_compressed_hooks(c.hooks);
    register_local_sgd_hooks(c.hooks);
    register_slowmo_hooks(c.hooks);
    return c;
  }();
  return instance;
}

}  // namespace commtune

// The hooks of torch.distributed.algorithms.ddp_comm_hooks.default_hooks (and
// the debugging noop hook), with the same arithmetic, plus DDP's built-in
// reduction as "none".
#pragma once

#include <memory>

#include "core/engine/hooks/hook_env.h"
#include "core/engine/component_registry.h"

namespace commtune {

using HookRegistry = ComponentRegistry<CommHook, HookEnv&>;

void register_default_hooks(HookRegistry& registry);

// fp16_compress_wrapper / bf16_compress_wrapper: the inner hook sees a cast
// copy of the bucket; its result is cast back into the original buffer.
std::unique_ptr<CommHook> make_compress_wrapper(at::ScalarType dtype, std::unique_ptr<CommHook> inner, HookEnv& env);

// Builds the hook a config section selects, wrapped as `wrapper` asks.
std::unique_ptr<CommHook> make_hook(const HookRegistry& registry, const nlohmann::json& section, HookEnv& env);

}  // namespace commtune

// The Python of the byteps hook for PyTorch's DDP (python/commtune/byteps_hook.py,
// compiled in by CMake): BytePS's push, server stage and pull as a
// register_comm_hook hook, the body of the exported use_byteps.py.
#pragma once

namespace commtune {

const char* byteps_torch_hook_source();

}  // namespace commtune

// The c10d surface commtune uses, across Debian's libtorch 1.13 and the
// libtorch of PyTorch 2.x wheels. Include only from .cpp files: it pulls in
// Gloo (and NCCL) headers.
#pragma once

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(COMMTUNE_WITH_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(COMMTUNE_WITH_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace commtune::compat {

// 1.13: ProcessGroupGloo/NCCL derive from ProcessGroup. 2.x: they derive from
// Backend, and ProcessGroup became a dispatching wrapper around backends. The
// collectives commtune calls have the same signatures on both bases.
#if TORCH_VERSION_MAJOR >= 2
using ProcessGroupBase = c10d::Backend;
#else
using ProcessGroupBase = c10d::ProcessGroup;
#endif

inline constexpr const char* kTorchVersion = TORCH_VERSION;

// Gloo sums bf16 (and averages) from PyTorch 2.x on; 1.13's refuses bf16
// ("Invalid scalar type"), so commtune moves the bits and sums them itself there.
inline constexpr bool kGlooSumsBf16 = TORCH_VERSION_MAJOR >= 2;

}  // namespace commtune::compat

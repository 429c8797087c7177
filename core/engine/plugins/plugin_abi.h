// What a plugin and commtune must agree on (the SDK version, libtorch's
// version, the C++ ABI), as one string: the loader compares it before a
// plugin's registration runs, and the SDK (plugins/commtune_plugin.h) builds
// it into every plugin. Here, below both, so the loader need not include the
// SDK.
#pragma once

#include <torch/version.h>

// Bumped whenever a type a plugin sees (the registries, CommHook, HookEnv,
// GradBucket, Communicator, Schema, Model, Dataset, Optimizer) changes.
#if defined(COMMTUNE_PLUGIN_ABI_OVERRIDE)  // tests build a stale plugin this way
#define COMMTUNE_PLUGIN_ABI COMMTUNE_PLUGIN_ABI_OVERRIDE
#else
#define COMMTUNE_PLUGIN_ABI 4  // 4: Optimizer::begin_step/update (a step in pieces); 3: CommHook::begin_step, ...
#endif

#define COMMTUNE_PLUGIN_STRINGIFY_(x) #x
#define COMMTUNE_PLUGIN_STRINGIFY(x) COMMTUNE_PLUGIN_STRINGIFY_(x)

// What a plugin and commtune must agree on, as text: compared before the
// plugin's registration runs.
#define COMMTUNE_PLUGIN_BUILD                                                              \
  "sdk=" COMMTUNE_PLUGIN_STRINGIFY(COMMTUNE_PLUGIN_ABI) ";torch=" TORCH_VERSION ";cxx11abi=" \
      COMMTUNE_PLUGIN_STRINGIFY(_GLIBCXX_USE_CXX11_ABI)

// The commtune plugin SDK. A plugin is a shared library that registers hooks,
// models, datasets or optimizers into the same registries as the built-ins,
// each with its parameter schema, so they appear in the CLI, configuration
// files, sweep axes and (later) the GUI exactly like built-in ones:
//
//   #include "plugins/commtune_plugin.h"
//   struct MyOptions { double alpha = 1; static commtune::Schema<MyOptions> schema() { ... } };
//   void register_mine(commtune::Catalog& catalog) {
//     catalog.hooks.add<MyOptions>("my_hook", "what it does",
//                                  [](const MyOptions& o, commtune::HookEnv& env) { return ...; });
//   }
//   COMMTUNE_PLUGIN("my-plugin", register_mine)
//
// Build it as a MODULE library against the same commtune headers and
// libtorch (plugins/examples/CMakeLists.txt shows how) and put it in a plugin
// folder (`commtune-cli plugins` lists them). A plugin built against another
// SDK version, libtorch version or C++ ABI is refused with a message saying
// which, before any of its code runs. docs/plugins.md has the details.
#pragma once

#include "core/engine/catalog.h"
#include "core/engine/plugins/plugin_abi.h"

#define COMMTUNE_PLUGIN(NAME, REGISTER)                                                                 \
  extern "C" __attribute__((visibility("default"))) const char* commtune_plugin_build() {             \
    return COMMTUNE_PLUGIN_BUILD;                                                                     \
  }                                                                                                   \
  extern "C" __attribute__((visibility("default"))) const char* commtune_plugin_name() { return NAME; } \
  extern "C" __attribute__((visibility("default"))) void commtune_plugin_register(::commtune::Catalog& catalog) { \
    REGISTER(catalog);                                                                                \
  }

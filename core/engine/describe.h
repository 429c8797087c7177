// The engine as the tuner reads it (core/tuner/config/components.h): the
// schema of every component it can build, the plugins it loaded, and what
// names its checks; what `commtune-worker --describe` prints; and what
// `commtune-worker --check` answers. A process that
// links the engine takes its components from the catalog itself.
#pragma once

#include <nlohmann/json.hpp>

namespace commtune {

nlohmann::json describe_engine();

// The engine's answer to the tuner's check (core/tuner/config/engine_check.h):
// each section normalised by its component, each hook sized against the model it would reduce.
nlohmann::json check_for_the_tuner(const nlohmann::json& request);

}  // namespace commtune

// The version string of every commtune binary: commtune's own version, the
// libtorch it was built against, and the accelerator support built in.
#pragma once

#include <string>

namespace commtune {

std::string version_text();

}  // namespace commtune

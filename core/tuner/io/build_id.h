// The GNU build id of the loaded object (executable or shared library) that
// holds an address: it changes whenever the object's code does, so it names
// one build exactly (the store's configuration stamps, db/store.h).
#pragma once

#include <string>

namespace commtune {

// Hex digits; "" when the object carries no build id (linked without --build-id).
std::string build_id_of(const void* address);
// The same for the loaded object dlopen() opened from `path`; "" when none is loaded from there.
std::string build_id_of_loaded(const std::string& path);

}  // namespace commtune

// Files in PyTorch's zip pickle format (what torch.save writes), holding only
// plain containers: dicts, lists, strings, ints, bools and tensors. They load
// with torch.load(path, weights_only=True) on PyTorch 1.13 and 2.x alike:
// libtorch's own pickle_save tags typed containers with a class that the
// weights-only unpickler refuses, so this writer leaves the tags out.
#pragma once

#include <string>

#include <ATen/core/ivalue.h>


namespace commtune {

void write_pickle_file(const std::string& path, const c10::IValue& value);
// Its value; its zip directory is checked first (core/tuner/io/zip_directory.h).
// Throws std::runtime_error naming the file.
c10::IValue read_pickle_file(const std::string& path);

}  // namespace commtune

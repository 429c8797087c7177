#include "core/engine/io/pickle_file.h"

#include "core/tuner/io/input_file.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/io/zip_directory.h"

#include <caffe2/serialize/inline_container.h>
#if __has_include(<torch/csrc/jit/serialization/export_utils.h>)
#include <torch/csrc/jit/serialization/export_utils.h>  // newer PyTorch keeps writeArchiveAndTensors here
#else
#include <torch/csrc/jit/serialization/export.h>
#endif
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <filesystem>
#include <fstream>

namespace commtune {

void write_pickle_file(const std::string& path, const c10::IValue& value) {
  std::vector<char> pickle_bytes;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickle_bytes.insert(pickle_bytes.end(), data, data + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();

  OutputFile file(path);  // a reader never sees half a file
  auto& out = file.stream();
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
      return out ? size : 0;
    });
    torch::jit::writeArchiveAndTensors("data", pickle_bytes.data(), pickle_bytes.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  file.commit();
}

c10::IValue read_pickle_file(const std::string& path) {
  checked_pytorch_archive(path);  // a zip bomb is refused before anything is read
  const auto bytes = read_input_file(path);
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const c10::Error& e) {
    throw std::runtime_error(path + " is not a pickle file this libtorch reads: " + e.what_without_backtrace());
  }
}

}  // namespace commtune

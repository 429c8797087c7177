// libFuzzer target: the headers of data and model files (MNIST's idx-ubyte,
// CIFAR-10's records, .npy and .safetensors, the zip directory of torch.save
// and TorchScript files). A header that lies must be an error before anything
// is allocated for it; the first byte picks the idx rank.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/engine/data/file_reader.h"
#include "core/engine/data/tensor_files.h"
#include "core/tuner/io/zip_directory.h"

namespace {

// The promise the tensor parsers make: each tensor lies whole inside the
// file, with exactly the bytes its type and shape need.
void check(const commtune::StoredTensor& t, std::uint64_t file_size) {
  std::uint64_t count = 1;
  for (const auto d : t.shape) count *= static_cast<std::uint64_t>(d);
  if (t.bytes != count * commtune::element_bytes(t.type) || t.offset > file_size || t.bytes > file_size - t.offset)
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t rank = data[0] % 4;
  const std::vector<unsigned char> bytes(data + 1, data + size);
  try {
    const auto header = commtune::parse_idx_header(bytes, rank, "fuzz");
    std::uint64_t count = 1;
    for (const auto d : header.dims) count *= static_cast<std::uint64_t>(d);
    if (header.data_offset + count != bytes.size()) __builtin_trap();  // the promise the parser makes
  } catch (const commtune::ConfigError&) {
  }
  try {
    commtune::check_cifar10_records(bytes, "fuzz");
  } catch (const commtune::ConfigError&) {
  }
  const std::string_view file(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  try {
    check(commtune::parse_npy_header(file, file.size(), "fuzz", "data.path"), file.size());
  } catch (const commtune::ConfigError&) {
  }
  try {
    for (const auto& t : commtune::parse_safetensors_header(file, file.size(), "fuzz", "data.path"))
      check(t, file.size());
  } catch (const commtune::ConfigError&) {
  }
  try {
    const auto read_at = [&](char* into, std::size_t count, std::uint64_t offset) {
      if (offset > file.size() || count > file.size() - offset) return false;
      file.copy(into, count, offset);
      return true;
    };
    if (const auto directory = commtune::checked_pytorch_archive("fuzz", file.size(), read_at)) {
      // The promises: the sum is the entries' sum, and the deflated ones stay under the limit.
      std::uint64_t all = 0, inflated = 0;
      for (const auto& e : directory->entries) {
        all += e.uncompressed_bytes;
        if (e.method != 0) inflated += e.uncompressed_bytes;
      }
      if (all != directory->uncompressed_bytes || inflated > commtune::kMaxInflatedBytes ||
          directory->entries.size() > commtune::kMaxZipEntries)
        __builtin_trap();
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}

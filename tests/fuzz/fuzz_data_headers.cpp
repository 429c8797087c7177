// libFuzzer target: the headers of data files (MNIST's idx-ubyte, CIFAR-10's
// records). A header that lies must be a ConfigError before anything is
// allocated for it; the first byte picks the idx rank.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/data/file_reader.h"

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
  return 0;
}

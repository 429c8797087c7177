// Tensors in the files a user writes in a line of NumPy or PyTorch: `.npy`
// (numpy.save) and `.safetensors` (safetensors' save_file). Their headers
// are parsed and checked against the file's size before anything else is
// read or allocated: every tensor a parser returns lies whole inside the
// file, at its offset, with exactly the bytes its type and shape need. No
// torch here: the parsers are fuzzed on their own (tests/fuzz).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace commtune {

enum class ElementType { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64 };

std::size_t element_bytes(ElementType type);
const char* element_name(ElementType type);  // numpy's names: float32, int64, ...
bool is_floating(ElementType type);

struct StoredTensor {
  std::string name;
  ElementType type = ElementType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // of its first byte in the file
  std::uint64_t bytes = 0;   // type size x elements, little-endian, row-major

  std::string shape_text() const;  // "[1000, 32]"
};

// The most of a file that is read to find its tensors: an .npy header, or
// a .safetensors file's JSON header (safetensors allows 100 MB).
inline constexpr std::uint64_t kMaxTensorHeaderBytes = std::uint64_t{100} << 20;

// How many bytes at the start of the file the parser below needs (0: the
// prefix is too short to tell; read at least 12 bytes, as many as the file has).
std::uint64_t npy_header_bytes(std::string_view prefix);
std::uint64_t safetensors_header_bytes(std::string_view prefix);

// The tensor of an .npy file, or those of a .safetensors file, from the
// file's first bytes (`head`: at least what *_header_bytes asked for) and
// its size. Throws ConfigError(field) naming `file` and what is wrong: a
// type commtune does not train on, big-endian or Fortran-ordered data, a
// shape whose bytes are not the file's, a tensor outside the file.
StoredTensor parse_npy_header(std::string_view head, std::uint64_t file_size, const std::string& file,
                              const std::string& field);
std::vector<StoredTensor> parse_safetensors_header(std::string_view head, std::uint64_t file_size,
                                                   const std::string& file, const std::string& field);

}  // namespace commtune

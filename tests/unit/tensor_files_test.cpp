// The .npy and .safetensors header parsers: what numpy and safetensors write
// is read as written; a header that lies about the file is refused, saying how.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/engine/data/tensor_files.h"
#include "core/tuner/schema/param_schema.h"

namespace {

using commtune::ConfigError;
using commtune::ElementType;

// An .npy file as numpy.save (format 1.0) writes it: the header padded with
// spaces to a multiple of 64 bytes, then `data_bytes` bytes.
std::string npy(const std::string& dict, std::size_t data_bytes, char major = 1) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += major;
  out += '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

std::string safetensors(const std::string& json, std::size_t data_bytes) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + std::string(data_bytes, '\0');
}

std::string npy_error(const std::string& file) {
  try {
    commtune::parse_npy_header(file, file.size(), "x.npy", "data.path");
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "data.path");
    return e.what();
  }
  return "";
}

std::string safetensors_error(const std::string& file) {
  try {
    commtune::parse_safetensors_header(file, file.size(), "d.safetensors", "data.path");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TensorFiles, NpyReadsNumpysHeader) {
  for (char major : {1, 2}) {
    const auto file = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48, major);
    ASSERT_EQ(commtune::npy_header_bytes(file.substr(0, 12)), file.size() - 48);
    const auto t = commtune::parse_npy_header(file, file.size(), "x.npy", "data.path");
    EXPECT_EQ(t.type, ElementType::F32);
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{3, 4}));
    EXPECT_EQ(t.offset, file.size() - 48);
    EXPECT_EQ(t.bytes, 48u);
  }
  const auto labels = npy("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }", 40);
  EXPECT_EQ(commtune::parse_npy_header(labels, labels.size(), "y.npy", "data.path").type, ElementType::I64);
  const auto bytes = npy("{'shape': (2, 2), 'fortran_order': False, 'descr': '|u1'}", 4);  // any key order
  EXPECT_EQ(commtune::parse_npy_header(bytes, bytes.size(), "b.npy", "data.path").type, ElementType::U8);
}

TEST(TensorFiles, NpyHeadersThatLieAreRefused) {
  EXPECT_NE(npy_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 47)).find("needs 48"),
            std::string::npos);
  EXPECT_NE(npy_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 1000000000000), }", 16))
                .find("larger than any file"),
            std::string::npos);
  EXPECT_NE(npy_error(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8)).find("big-endian"),
            std::string::npos);
  EXPECT_NE(npy_error(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16)).find("Fortran"),
            std::string::npos);
  EXPECT_NE(npy_error(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16)).find("'<c8'"),
            std::string::npos);
  EXPECT_NE(npy_error(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8)).find("structured"),
            std::string::npos);
  EXPECT_NE(npy_error(npy("{'descr': '<f4', 'shape': (2,), }", 8)).find("lacks"), std::string::npos);
  EXPECT_NE(npy_error("not numpy at all"), "");
  auto truncated = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  truncated[8] = '\xff';  // a header length past the end of the file
  EXPECT_NE(npy_error(truncated).find("more than the file holds"), std::string::npos);
}

TEST(TensorFiles, SafetensorsReadsEachTensorsPlace) {
  const auto file = safetensors(
      R"({"__metadata__": {"format": "pt"}, "x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},)"
      R"( "y": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}})",
      40);
  ASSERT_EQ(commtune::safetensors_header_bytes(file.substr(0, 8)), file.size() - 40);
  const auto tensors = commtune::parse_safetensors_header(file, file.size(), "d.safetensors", "data.path");
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].name, "x");
  EXPECT_EQ(tensors[0].offset, file.size() - 40);
  EXPECT_EQ(tensors[1].type, ElementType::I64);
  EXPECT_EQ(tensors[1].offset, file.size() - 16);
  EXPECT_EQ(tensors[1].bytes, 16u);
}

TEST(TensorFiles, SafetensorsHeadersThatLieAreRefused) {
  EXPECT_NE(safetensors_error(safetensors(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", 8))
                .find("outside the file"),
            std::string::npos);
  EXPECT_NE(safetensors_error(safetensors(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8))
                .find("needs 12"),
            std::string::npos);
  EXPECT_NE(safetensors_error(safetensors(R"({"x": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", 2))
                .find("F8_E4M3"),
            std::string::npos);
  EXPECT_NE(safetensors_error(safetensors(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4))
                .find("not a list of sizes"),
            std::string::npos);
  EXPECT_NE(safetensors_error(safetensors(R"([1, 2])", 0)).find("not a JSON object"), std::string::npos);
  auto huge = safetensors(R"({})", 0);
  huge[5] = '\x01';  // a header length of 2^40 bytes
  EXPECT_NE(safetensors_error(huge).find("exceeds the file"), std::string::npos);
}

}  // namespace

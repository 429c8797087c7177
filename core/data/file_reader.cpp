#include "core/data/file_reader.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/io/input_file.h"
#include "core/schema/param_schema.h"

namespace commtune {

Schema<FileDatasetOptions> FileDatasetOptions::schema() {
  return Schema<FileDatasetOptions>()
      .required_text("path", &FileDatasetOptions::path, "the folder holding the dataset's files (plain or .gz)")
      .choice("split", &FileDatasetOptions::split, {"train", "test"}, "the training or the test files")
      .integer("limit", &FileDatasetOptions::limit, Range::at_least(0), "samples",
               "use only the first N samples (0: all)")
      .flag("normalize", &FileDatasetOptions::normalize,
            "scale pixels to [0, 1], then standardise with the dataset's usual mean and deviation");
}

std::vector<unsigned char> read_data_file(const std::string& path, const std::string& field) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto as_bytes = [&](const std::string& file) {
    try {
      const auto bytes = read_input_file(file);
      return std::vector<unsigned char>(bytes.begin(), bytes.end());
    } catch (const std::runtime_error& e) {
      throw ConfigError(field, e.what());
    }
  };
  if (fs::exists(path, ec) || fs::is_symlink(path, ec)) return as_bytes(path);
  const auto gz = path + ".gz";
  if (!fs::exists(gz, ec)) throw ConfigError(field, "neither " + path + " nor " + gz + " exists");
  const auto compressed = as_bytes(gz);
  // gzip's deflate expands at most about 1032:1: more is not a data file.
  const std::uint64_t limit = std::min<std::uint64_t>(kMaxInputFileBytes, 1100 * compressed.size() + (1 << 20));
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw ConfigError(field, "cannot decompress " + gz);
  z.next_in = const_cast<unsigned char*>(compressed.data());
  z.avail_in = static_cast<uInt>(compressed.size());
  std::vector<unsigned char> out;
  unsigned char chunk[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = chunk;
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.insert(out.end(), chunk, chunk + (sizeof chunk - z.avail_out));
    if (out.size() > limit) rc = Z_MEM_ERROR;
  }
  inflateEnd(&z);
  if (rc == Z_MEM_ERROR) throw ConfigError(field, gz + " decompresses to more than " + std::to_string(limit) + " bytes");
  if (rc != Z_STREAM_END) throw ConfigError(field, gz + " is not a valid gzip file");
  return out;
}

namespace {
std::uint32_t big_endian(const std::vector<unsigned char>& b, std::size_t at) {
  return (std::uint32_t(b[at]) << 24) | (std::uint32_t(b[at + 1]) << 16) | (std::uint32_t(b[at + 2]) << 8) | b[at + 3];
}
}  // namespace

IdxHeader parse_idx_header(const std::vector<unsigned char>& bytes, std::size_t rank, const std::string& file) {
  if (bytes.size() < 4 || big_endian(bytes, 0) != (0x800u | rank))
    throw ConfigError("data.path", file + " is not an idx" + std::to_string(rank) + "-ubyte file");
  IdxHeader header;
  header.data_offset = 4 + 4 * rank;
  if (bytes.size() < header.data_offset) throw ConfigError("data.path", file + " is truncated");
  for (std::size_t d = 0; d < rank; ++d)
    if (big_endian(bytes, 4 + 4 * d) == 0)
      throw ConfigError("data.path", file + ": dimension " + std::to_string(d) + " of its header is 0");
  const std::uint64_t data_bytes = bytes.size() - header.data_offset;
  std::uint64_t count = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    const std::uint64_t size = big_endian(bytes, 4 + 4 * d);
    if (size > data_bytes / count)
      throw ConfigError("data.path", file + ": its header's dimensions need more bytes than the file's " +
                                         std::to_string(data_bytes));
    count *= size;
    header.dims.push_back(static_cast<std::int64_t>(size));
  }
  if (data_bytes != count)
    throw ConfigError("data.path", file + " holds " + std::to_string(data_bytes) + " data bytes, its header says " +
                                       std::to_string(count));
  return header;
}

void check_cifar10_records(const std::vector<unsigned char>& bytes, const std::string& file) {
  if (bytes.size() % kCifarRecordBytes != 0)
    throw ConfigError("data.path", file + " is not a CIFAR-10 binary file (size not a multiple of 3073 bytes)");
  for (std::size_t at = 0; at < bytes.size(); at += kCifarRecordBytes)
    if (bytes[at] > 9)
      throw ConfigError("data.path", file + ": record " + std::to_string(at / kCifarRecordBytes) + " has label " +
                                         std::to_string(bytes[at]) + "; CIFAR-10 labels are 0..9");
}

}  // namespace commtune

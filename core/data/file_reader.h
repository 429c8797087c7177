// Reads a whole data file, transparently gunzipping FILE.gz when FILE itself is absent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/schema/param_schema.h"

namespace commtune {

// The parameters of a dataset read from files in a local folder.
struct FileDatasetOptions {
  std::string path;
  std::string split = "train";
  std::int64_t limit = 0;
  bool normalize = true;

  static Schema<FileDatasetOptions> schema();
};

// Returns the bytes of `path`, or of `path + ".gz"` decompressed. Throws
// ConfigError naming `field` when neither exists, when it is not a regular
// file, or when it decompresses to more than gzip can expand.
std::vector<unsigned char> read_data_file(const std::string& path, const std::string& field);

// An idx-ubyte file's header (MNIST): its dimensions, and where its data
// starts. Throws ConfigError (data.path, naming `file`) unless the magic has
// `rank` dimensions, none is 0, and they multiply to exactly the bytes after
// the header (checked as they are read: no product overflows).
struct IdxHeader {
  std::vector<std::int64_t> dims;
  std::size_t data_offset = 0;
};
IdxHeader parse_idx_header(const std::vector<unsigned char>& bytes, std::size_t rank, const std::string& file);

inline constexpr std::size_t kCifarRecordBytes = 1 + 3 * 32 * 32;  // a label byte, then the pixels
// Throws ConfigError (data.path, naming `file`) unless `bytes` are whole
// CIFAR-10 records whose labels are 0..9.
void check_cifar10_records(const std::vector<unsigned char>& bytes, const std::string& file);

}  // namespace commtune

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
// ConfigError naming `field` when neither exists.
std::vector<unsigned char> read_data_file(const std::string& path, const std::string& field);

}  // namespace commtune

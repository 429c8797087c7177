#include "core/data/file_reader.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/schema/param_schema.h"

namespace commtune {

Schema<FileDatasetOptions> FileDatasetOptions::schema() {
  return Schema<FileDatasetOptions>()
      .text("path", &FileDatasetOptions::path, "folder holding the dataset's files (plain or .gz)")
      .choice("split", &FileDatasetOptions::split, {"train", "test"}, "the training or the test files")
      .integer("limit", &FileDatasetOptions::limit, Range::at_least(0), "samples",
               "use only the first N samples (0: all)")
      .flag("normalize", &FileDatasetOptions::normalize,
            "scale pixels to [0, 1], then standardise with the dataset's usual mean and deviation");
}

std::vector<unsigned char> read_data_file(const std::string& path, const std::string& field) {
  namespace fs = std::filesystem;
  if (fs::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError(field, "cannot read " + path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  const auto gz = path + ".gz";
  if (!fs::exists(gz)) throw ConfigError(field, "neither " + path + " nor " + gz + " exists");
  gzFile file = gzopen(gz.c_str(), "rb");
  if (!file) throw ConfigError(field, "cannot open " + gz);
  std::vector<unsigned char> out;
  unsigned char chunk[1 << 16];
  int n;
  while ((n = gzread(file, chunk, sizeof chunk)) > 0) out.insert(out.end(), chunk, chunk + n);
  const bool failed = n < 0;
  gzclose(file);
  if (failed) throw ConfigError(field, gz + " is not a valid gzip file");
  return out;
}

}  // namespace commtune

// Reads a whole data file, transparently gunzipping FILE.gz when FILE itself is absent.
#pragma once

#include <string>
#include <vector>

namespace commtune {

// Returns the bytes of `path`, or of `path + ".gz"` decompressed. Throws
// ConfigError naming `field` when neither exists.
std::vector<unsigned char> read_data_file(const std::string& path, const std::string& field);

}  // namespace commtune

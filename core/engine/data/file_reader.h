// Reads a whole data file, transparently gunzipping FILE.gz when FILE itself is absent.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tuner/schema/param_schema.h"

namespace commtune {

// The parameters of a dataset read from files in a local folder.
struct FileDatasetOptions {
  std::string path;
  std::string split = "train";
  std::int64_t limit = 0;
  bool normalize = true;
  double max_gib = 2;

  static Schema<FileDatasetOptions> schema();
};

// What a dataset's files may hold together (data.max_gib), taken as each is
// checked and before it is read or inflated further.
class DataBudget {
 public:
  explicit DataBudget(double gib);
  std::uint64_t left() const { return left_; }
  // Takes `bytes` for `what`; throws ConfigError (data.max_gib, saying to raise it) when fewer are left.
  void take(std::uint64_t bytes, const std::string& what);
  // The error take() throws for `what`, which needs more than is left.
  [[noreturn]] void exceeded(const std::string& what, const std::string& needs) const;

 private:
  std::uint64_t left_;
  double gib_;
};

// Says why a file of this many bytes cannot be the dataset's ("" when it can).
using SizeCheck = std::function<std::string(std::uint64_t bytes)>;

// Returns the bytes of `path`, or of `path + ".gz"` decompressed. Throws
// ConfigError naming `field` when neither exists, when it is not a regular
// file, when `size_check` refuses its size (the file's, checked before it is
// read; a gzip file's, as inflated), or when it decompresses to more than
// gzip can expand; ConfigError naming data.max_gib when it holds more than
// `budget` has left (checked before reading, and while inflating).
std::vector<unsigned char> read_data_file(const std::string& path, const std::string& field, DataBudget& budget,
                                          const SizeCheck& size_check = {});

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
// Why a file of `bytes` bytes cannot hold CIFAR-10 records ("" when it can).
std::string cifar10_size_problem(std::uint64_t bytes);
// Throws ConfigError (data.path, naming `file`) unless `bytes` are whole
// CIFAR-10 records whose labels are 0..9.
void check_cifar10_records(const std::vector<unsigned char>& bytes, const std::string& file);

}  // namespace commtune

#include "core/engine/data/file_reader.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/tuner/io/input_file.h"
#include "core/tuner/schema/param_schema.h"

namespace commtune {

Schema<FileDatasetOptions> FileDatasetOptions::schema() {
  return Schema<FileDatasetOptions>()
      .required_text("path", &FileDatasetOptions::path, "the folder holding the dataset's files (plain or .gz)")
      .choice("split", &FileDatasetOptions::split, {"train", "test"}, "the training or the test files")
      .integer("limit", &FileDatasetOptions::limit, Range::at_least(0), "samples",
               "use only the first N samples (0: all)")
      .flag("normalize", &FileDatasetOptions::normalize,
            "scale pixels to [0, 1], then standardise with the dataset's usual mean and deviation")
      .real("max_gib", &FileDatasetOptions::max_gib, Range::above(0), "GiB",
            "the most the dataset's files may hold together (decompressed): a file's size is checked against it "
            "before the file is read, a gzip file's as it inflates");
}

DataBudget::DataBudget(double gib)
    : left_(static_cast<std::uint64_t>(gib * double(std::uint64_t{1} << 30))), gib_(gib) {}

void DataBudget::take(std::uint64_t bytes, const std::string& what) {
  if (bytes > left_) exceeded(what, std::to_string(bytes) + " bytes");
  left_ -= bytes;
}

void DataBudget::exceeded(const std::string& what, const std::string& needs) const {
  std::ostringstream gib;
  gib << gib_;
  throw ConfigError("data.max_gib", what + " needs " + needs + ", more than the " + gib.str() +
                                        " GiB this dataset may take" + (left_ < gib_ * 1073741824.0 ? " (what is left of it)" : "") +
                                        ": raise data.max_gib");
}

std::vector<unsigned char> read_data_file(const std::string& path, const std::string& field, DataBudget& budget,
                                          const SizeCheck& size_check) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto checked = [&](const std::string& file, std::uint64_t size) {
    if (size_check)
      if (const auto problem = size_check(size); !problem.empty()) throw ConfigError(field, file + " " + problem);
  };
  // A file's size is checked before a byte of it is read.
  const auto file_bytes = [&](const std::string& file, bool take) {
    const InputFile in(file);
    if (!in.problem().empty()) throw ConfigError(field, in.problem());
    if (take) {
      checked(file, in.size());
      budget.take(in.size(), file);
    } else if (in.size() > budget.left()) {
      budget.exceeded(file, std::to_string(in.size()) + " bytes compressed");
    }
    std::vector<unsigned char> bytes(static_cast<std::size_t>(in.size()));
    if (!in.read_at(reinterpret_cast<char*>(bytes.data()), bytes.size(), 0))
      throw ConfigError(field, "cannot read " + file + " to its end (" + std::to_string(in.size()) + " bytes)");
    return bytes;
  };
  if (fs::exists(path, ec) || fs::is_symlink(path, ec)) return file_bytes(path, true);
  const auto gz = path + ".gz";
  if (!fs::exists(gz, ec)) throw ConfigError(field, "neither " + path + " nor " + gz + " exists");
  const auto compressed = file_bytes(gz, false);
  // gzip's deflate expands at most about 1032:1: more is not a data file.
  const std::uint64_t gzip_limit = 1100 * std::uint64_t(compressed.size()) + (1 << 20);
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw ConfigError(field, "cannot decompress " + gz);
  z.next_in = const_cast<unsigned char*>(compressed.data());
  z.avail_in = static_cast<uInt>(compressed.size());
  std::vector<unsigned char> out;
  unsigned char chunk[1 << 16];
  int rc = Z_OK;
  bool over_budget = false;
  while (rc == Z_OK) {
    z.next_out = chunk;
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.insert(out.end(), chunk, chunk + (sizeof chunk - z.avail_out));
    over_budget = out.size() > budget.left();
    if (over_budget || out.size() > gzip_limit) rc = Z_MEM_ERROR;
  }
  inflateEnd(&z);
  if (over_budget) budget.exceeded(gz, "more than " + std::to_string(budget.left()) + " bytes decompressed");
  if (rc == Z_MEM_ERROR)
    throw ConfigError(field, gz + " decompresses to more than " + std::to_string(gzip_limit) + " bytes");
  if (rc != Z_STREAM_END) throw ConfigError(field, gz + " is not a valid gzip file");
  checked(gz, out.size());
  budget.take(out.size(), gz);
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

std::string cifar10_size_problem(std::uint64_t bytes) {
  if (bytes % kCifarRecordBytes == 0) return "";
  return "is not a CIFAR-10 binary file (" + std::to_string(bytes) + " bytes, not a multiple of 3073)";
}

void check_cifar10_records(const std::vector<unsigned char>& bytes, const std::string& file) {
  if (const auto problem = cifar10_size_problem(bytes.size()); !problem.empty())
    throw ConfigError("data.path", file + " " + problem);
  for (std::size_t at = 0; at < bytes.size(); at += kCifarRecordBytes)
    if (bytes[at] > 9)
      throw ConfigError("data.path", file + ": record " + std::to_string(at / kCifarRecordBytes) + " has label " +
                                         std::to_string(bytes[at]) + "; CIFAR-10 labels are 0..9");
}

}  // namespace commtune

// The central directory of a zip archive (a TorchScript file, a torch.save
// file): each entry's name and sizes, read from the archive's end without
// reading or inflating any entry. What loading the archive would allocate is
// known from it before anything is loaded: PyTorch's reader allocates each
// entry's uncompressed size as the directory states it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace commtune {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflated
  std::uint64_t compressed_bytes = 0;
  std::uint64_t uncompressed_bytes = 0;
};

struct ZipDirectory {
  std::vector<ZipEntry> entries;
  std::uint64_t uncompressed_bytes = 0;  // all entries together
};

inline constexpr std::uint64_t kMaxZipDirectoryBytes = std::uint64_t{64} << 20;
inline constexpr std::uint64_t kMaxZipEntries = std::uint64_t{1} << 20;

// Reads `count` bytes at `offset` of the archive into `into`; false when the
// archive ends first.
using ReadAt = std::function<bool(char* into, std::size_t count, std::uint64_t offset)>;

// The directory of the `archive_bytes`-long archive that `read_at` reads
// (zip64 included). nullopt when it has no end-of-directory record (not a zip
// archive). Throws std::runtime_error saying what is wrong when the directory
// is damaged: offsets past the end, more than kMaxZipDirectoryBytes or
// kMaxZipEntries (checked before anything is allocated), sizes that overflow.
std::optional<ZipDirectory> read_zip_directory(std::uint64_t archive_bytes, const ReadAt& read_at);

// PyTorch deflates only small entries (TorchScript's code and debug pickles);
// tensors are stored as they are. Deflated entries that inflate past this,
// all together, are not PyTorch's: a zip bomb.
inline constexpr std::uint64_t kMaxInflatedBytes = std::uint64_t{64} << 20;

// The directory of a file PyTorch wrote as a zip archive (torch.save,
// torch.jit.save), checked before anything in it is read: throws
// std::runtime_error, naming `path`, when the directory is damaged or its
// deflated entries inflate past kMaxInflatedBytes. nullopt when it is not a
// zip archive.
std::optional<ZipDirectory> checked_pytorch_archive(const std::string& path, std::uint64_t archive_bytes,
                                                    const ReadAt& read_at);
// The same for the file at `path` (read no further than its directory);
// also throws when it is missing or not a regular file.
std::optional<ZipDirectory> checked_pytorch_archive(const std::string& path);

}  // namespace commtune

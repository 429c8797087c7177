#include "core/tuner/io/zip_directory.h"

#include "core/tuner/io/input_file.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace commtune {

namespace {

constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
constexpr std::uint32_t kEntrySignature = 0x02014b50;
constexpr std::size_t kEndBytes = 22;
constexpr std::size_t kMaxCommentBytes = 0xffff;
constexpr std::size_t kZip64LocatorBytes = 20;
constexpr std::size_t kZip64EndBytes = 56;
constexpr std::size_t kEntryBytes = 46;

std::uint64_t little_endian(const char* at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(at[i]);
  return v;
}

[[noreturn]] void damaged(const std::string& why) { throw std::runtime_error("its zip directory is damaged: " + why); }

std::string read_exactly(const ReadAt& read_at, std::uint64_t offset, std::size_t count) {
  std::string out(count, '\0');
  if (!read_at(out.data(), count, offset)) damaged("it ends before byte " + std::to_string(offset + count));
  return out;
}

// The zip64 extra field's 64-bit values for the 32-bit fields that say
// 0xffffffff, in the order the format gives them.
void read_zip64_sizes(std::string_view extra, ZipEntry& entry, bool want_uncompressed, bool want_compressed) {
  std::size_t at = 0;
  while (at + 4 <= extra.size()) {
    const auto id = little_endian(extra.data() + at, 2);
    const auto size = little_endian(extra.data() + at + 2, 2);
    if (at + 4 + size > extra.size()) damaged("an extra field of " + entry.name + " runs past its end");
    if (id == 0x0001) {
      std::size_t field = at + 4;
      const auto next = [&]() {
        if (field + 8 > at + 4 + size) damaged("the zip64 field of " + entry.name + " is too short");
        const auto v = little_endian(extra.data() + field, 8);
        field += 8;
        return v;
      };
      if (want_uncompressed) entry.uncompressed_bytes = next();
      if (want_compressed) entry.compressed_bytes = next();
      return;
    }
    at += 4 + size;
  }
  damaged(entry.name + " needs a zip64 field and has none");
}

}  // namespace

// Not libzip (libarchive has no compressed size or method): the same entries, but no bound before it allocates
// (a 100 MB directory of 2.2M entries: 5.2 s and 570 MB in libzip 1.7, refused here in 1 ms), and a 100 MB
// model's 200 entries in 423 us, 11 us here (bench/byhand/zip_bench.cpp, 2026-12-02).
std::optional<ZipDirectory> read_zip_directory(std::uint64_t archive_bytes, const ReadAt& read_at) {
  if (archive_bytes < kEndBytes) return std::nullopt;
  // The end record is in the last 22 bytes plus at most a 64 KiB comment.
  const auto tail_bytes = static_cast<std::size_t>(std::min<std::uint64_t>(archive_bytes, kEndBytes + kMaxCommentBytes));
  const auto tail_at = archive_bytes - tail_bytes;
  const auto tail = read_exactly(read_at, tail_at, tail_bytes);
  std::size_t end = std::string::npos;
  for (std::size_t at = tail_bytes - kEndBytes + 1; at-- > 0;)
    if (little_endian(tail.data() + at, 4) == kEndSignature) {
      end = at;
      break;
    }
  if (end == std::string::npos) return std::nullopt;

  std::uint64_t entries = little_endian(tail.data() + end + 10, 2);
  std::uint64_t directory_bytes = little_endian(tail.data() + end + 12, 4);
  std::uint64_t directory_at = little_endian(tail.data() + end + 16, 4);
  const std::uint64_t end_at = tail_at + end;
  if (entries == 0xffff || directory_bytes == 0xffffffff || directory_at == 0xffffffff) {
    if (end_at < kZip64LocatorBytes) damaged("its zip64 locator is missing");
    const auto locator = read_exactly(read_at, end_at - kZip64LocatorBytes, kZip64LocatorBytes);
    if (little_endian(locator.data(), 4) != kZip64LocatorSignature) damaged("its zip64 locator is missing");
    const auto zip64_end_at = little_endian(locator.data() + 8, 8);
    if (zip64_end_at > archive_bytes || archive_bytes - zip64_end_at < kZip64EndBytes)
      damaged("its zip64 end record lies past the end");
    const auto zip64_end = read_exactly(read_at, zip64_end_at, kZip64EndBytes);
    if (little_endian(zip64_end.data(), 4) != kZip64EndSignature) damaged("its zip64 end record is missing");
    entries = little_endian(zip64_end.data() + 32, 8);
    directory_bytes = little_endian(zip64_end.data() + 40, 8);
    directory_at = little_endian(zip64_end.data() + 48, 8);
  }
  if (entries > kMaxZipEntries)
    damaged("it lists " + std::to_string(entries) + " entries, more than " + std::to_string(kMaxZipEntries));
  if (directory_bytes > kMaxZipDirectoryBytes)
    damaged("it is " + std::to_string(directory_bytes) + " bytes, more than " + std::to_string(kMaxZipDirectoryBytes));
  if (directory_at > archive_bytes || archive_bytes - directory_at < directory_bytes)
    damaged("it lies past the end of the file");
  if (entries * kEntryBytes > directory_bytes)
    damaged(std::to_string(entries) + " entries cannot fit in " + std::to_string(directory_bytes) + " bytes");

  const auto directory = read_exactly(read_at, directory_at, static_cast<std::size_t>(directory_bytes));
  ZipDirectory out;
  out.entries.reserve(static_cast<std::size_t>(entries));
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < entries; ++i) {
    if (directory.size() - at < kEntryBytes || little_endian(directory.data() + at, 4) != kEntrySignature)
      damaged("entry " + std::to_string(i) + " is not where the directory says");
    const char* h = directory.data() + at;
    ZipEntry entry;
    entry.method = static_cast<std::uint16_t>(little_endian(h + 10, 2));
    entry.compressed_bytes = little_endian(h + 20, 4);
    entry.uncompressed_bytes = little_endian(h + 24, 4);
    const auto name_bytes = little_endian(h + 28, 2), extra_bytes = little_endian(h + 30, 2),
               comment_bytes = little_endian(h + 32, 2);
    const auto record_bytes = kEntryBytes + name_bytes + extra_bytes + comment_bytes;
    if (directory.size() - at < record_bytes) damaged("entry " + std::to_string(i) + " runs past the directory");
    entry.name.assign(h + kEntryBytes, name_bytes);
    const bool wide_uncompressed = entry.uncompressed_bytes == 0xffffffff,
               wide_compressed = entry.compressed_bytes == 0xffffffff;
    if (wide_uncompressed || wide_compressed)
      read_zip64_sizes(std::string_view(h + kEntryBytes + name_bytes, extra_bytes), entry, wide_uncompressed,
                       wide_compressed);
    if (entry.uncompressed_bytes > std::numeric_limits<std::uint64_t>::max() - out.uncompressed_bytes)
      damaged("its entries' sizes overflow");
    out.uncompressed_bytes += entry.uncompressed_bytes;
    out.entries.push_back(std::move(entry));
    at += record_bytes;
  }
  return out;
}

std::optional<ZipDirectory> checked_pytorch_archive(const std::string& path, std::uint64_t archive_bytes,
                                                    const ReadAt& read_at) {
  std::optional<ZipDirectory> directory;
  try {
    directory = read_zip_directory(archive_bytes, read_at);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  if (!directory) return directory;
  std::uint64_t inflated = 0;
  const ZipEntry* largest = nullptr;
  for (const auto& entry : directory->entries) {
    if (entry.method == 0) continue;
    inflated += entry.uncompressed_bytes;  // no overflow: read_zip_directory checked the sum of all
    if (!largest || entry.uncompressed_bytes > largest->uncompressed_bytes) largest = &entry;
  }
  if (inflated > kMaxInflatedBytes)
    throw std::runtime_error(path + " is not a file PyTorch wrote: its compressed entries inflate to " +
                             std::to_string(inflated) + " bytes (" + largest->name + ": " +
                             std::to_string(largest->uncompressed_bytes) + " from " +
                             std::to_string(largest->compressed_bytes) + "), more than the " +
                             std::to_string(kMaxInflatedBytes) + " PyTorch ever compresses");
  return directory;
}

std::optional<ZipDirectory> checked_pytorch_archive(const std::string& path) {
  const InputFile file(path);
  if (!file.problem().empty()) throw std::runtime_error(file.problem());
  return checked_pytorch_archive(path, file.size(), [&](char* into, std::size_t count, std::uint64_t offset) {
    return file.read_at(into, count, offset);
  });
}

}  // namespace commtune

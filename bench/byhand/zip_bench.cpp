// The zip directory of a PyTorch-like archive, listed by the project's
// reader (core/tuner/io/zip_directory.cpp), by libzip and by libarchive:
// the same entries (name, method, sizes), time per listing, peak RSS.
// Headers from Debian packages unpacked, not installed: apt-get download libsodium-dev libzip-dev libzip4
// libarchive-dev nlohmann-json3-dev libboost1.74-dev; dpkg -x each into /tmp/byhand/root;
// I=/tmp/byhand/root/usr/include L=/tmp/byhand/root/usr/lib/x86_64-linux-gnu; each g++ command
// below spans two lines, run from the repository's root (first: ln -s
// /usr/lib/x86_64-linux-gnu/libarchive.so.13 $L/libarchive.so):
//   g++ -std=c++20 -O2 -I. -I$I bench/byhand/zip_bench.cpp core/tuner/io/zip_directory.cpp
//       core/tuner/io/input_file.cpp -L$L -lzip -larchive -o /tmp/byhand/zip_bench
//   LD_LIBRARY_PATH=$L /tmp/byhand/zip_bench FILE.zip ours|libzip|libarchive [repeats]
//   (one reader a process, for its RSS; a fifth argument also prints the entries, to compare readers)
// The archives, with python3:
//   a model, 100 MB in 200 entries: zipfile.ZipFile('model100m.zip', 'w'): archive/data.pkl (2 KB),
//     archive/version stored, archive/constants.pkl (5 KB) and archive/code/__torch__/model.py (3.5 KB)
//     deflated, archive/data/0..195 stored, os.urandom(100 * 1000 * 1000 // 196) each.
//   a hostile directory: 2,200,000 central-directory records of 46 bytes with empty names
//     (struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, *[0] * 14)) from offset 0, then a zip64 end
//     record ('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0, n, n, 46 * n, 0), its locator ('<IIQI',
//     0x07064b50, 0, its offset, 1) and an end record saying 0xffff entries ('<IHHHHIIH', 0x06054b50, 0, 0,
//     0xffff, 0xffff, 0xffffffff, 0xffffffff, 0).
#include <archive.h>
#include <archive_entry.h>
#include <sys/resource.h>
#include <zip.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/tuner/io/zip_directory.h"

using commtune::ZipEntry;

static std::vector<ZipEntry> ours(const char* path) {
  return commtune::checked_pytorch_archive(path).value().entries;
}

static std::vector<ZipEntry> with_libzip(const char* path) {
  int error = 0;
  zip_t* z = zip_open(path, ZIP_RDONLY, &error);
  if (!z) throw std::runtime_error("libzip: error " + std::to_string(error));
  std::vector<ZipEntry> out;
  const auto n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t s;
    if (zip_stat_index(z, i, 0, &s) != 0) throw std::runtime_error("libzip: stat");
    out.push_back({s.name, static_cast<std::uint16_t>(s.comp_method), s.comp_size, s.size});
  }
  zip_discard(z);
  return out;
}

// libarchive has no compressed size or method per entry: those stay 0.
static std::vector<ZipEntry> with_libarchive(const char* path) {
  archive* a = archive_read_new();
  archive_read_support_format_zip_seekable(a);
  if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(a));
  std::vector<ZipEntry> out;
  archive_entry* e;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK)
    out.push_back({archive_entry_pathname(e), 0, 0, static_cast<std::uint64_t>(archive_entry_size(e))});
  archive_read_free(a);
  return out;
}

static long peak_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string how = argv[2];
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 1000;
  const auto list = how == "ours" ? ours : how == "libzip" ? with_libzip : with_libarchive;
  const long before = peak_kib();
  try {
    const auto entries = list(argv[1]);
    const long after = peak_kib();
    std::vector<double> us;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto again = list(argv[1]);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      if (again.size() != entries.size()) return 3;
    }
    std::sort(us.begin(), us.end());
    unsigned long long all = 0;
    for (const auto& e : entries) all += e.uncompressed_bytes;
    std::printf("%-10s %zu entries, %llu bytes uncompressed; median %.1f us per listing; peak RSS %ld KiB (+%ld for "
                "the first listing)\n",
                how.c_str(), entries.size(), all, us[us.size() / 2], after, after - before);
    if (argc > 4)  // the entries, to compare readers: name method compressed uncompressed
      for (const auto& e : entries)
        std::printf("%s %u %llu %llu\n", e.name.c_str(), e.method, (unsigned long long)e.compressed_bytes,
                    (unsigned long long)e.uncompressed_bytes);
  } catch (const std::exception& e) {
    std::printf("%-10s refused: %s (peak RSS %ld KiB, +%ld)\n", how.c_str(), e.what(), peak_kib(), peak_kib() - before);
  }
}

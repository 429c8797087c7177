// SipHash-2-4: db/config_check.cpp's siphash24 (linked from the build's tuner library) beside
// libsodium's crypto_shorthash_siphash24, same bits and time per hash on the
// sizes config_stamp hashes (a configuration's JSON text, 200 B - 4 KB).
// Headers from Debian packages unpacked, not installed: apt-get download libsodium-dev libzip-dev libzip4
// libarchive-dev nlohmann-json3-dev libboost1.74-dev; dpkg -x each into /tmp/byhand/root;
// I=/tmp/byhand/root/usr/include L=/tmp/byhand/root/usr/lib/x86_64-linux-gnu; from the repository's
// root (the g++ command spans two lines):
//   g++ -std=c++20 -O2 -I. -I$I bench/byhand/siphash_bench.cpp -o /tmp/byhand/siphash_bench
//       build/core/tuner/libcommtune_tuner.so /usr/lib/x86_64-linux-gnu/libsodium.so.23
//   /tmp/byhand/siphash_bench
#include <sodium.h>

#include "db/config_check.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using commtune::db::siphash24;

std::uint64_t sodium(const std::array<unsigned char, 16>& key, std::string_view text) {
  unsigned char out[crypto_shorthash_siphash24_BYTES];
  crypto_shorthash_siphash24(out, reinterpret_cast<const unsigned char*>(text.data()), text.size(), key.data());
  std::uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = w << 8 | out[i];  // libsodium writes the 64 bits little-endian
  return w;
}

template <class F>
double ns_per_hash(F f, const std::array<unsigned char, 16>& key, const std::string& text) {
  const int n = std::max(2000, int(20'000'000 / (text.size() + 16)));
  std::vector<double> runs;
  std::uint64_t sink = 0;
  for (int r = 0; r < 9; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) sink += f(key, text);  // the sum keeps every call
    runs.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  std::sort(runs.begin(), runs.end());
  if (sink == 42) std::puts("");
  return runs[runs.size() / 2];  // the median of 9
}

int main() {
  if (sodium_init() < 0) return 1;
  std::mt19937_64 random(7);
  std::array<unsigned char, 16> key{};
  // The SipHash paper's vector: key 00..0f, message 00..0e -> a129ca6149be45e5.
  for (int i = 0; i < 16; ++i) key[i] = static_cast<unsigned char>(i);
  std::string paper;
  for (int i = 0; i < 15; ++i) paper += static_cast<char>(i);
  std::printf("paper vector: ours %016llx, libsodium %016llx\n", (unsigned long long)siphash24(key, paper),
              (unsigned long long)sodium(key, paper));
  int differ = 0, compared = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    for (auto& k : key) k = static_cast<unsigned char>(random());
    std::string text(trial < 1000 ? trial % 80 : random() % 5000, '\0');
    for (auto& c : text) c = static_cast<char>(random());
    ++compared;
    differ += siphash24(key, text) != sodium(key, text);
  }
  std::printf("random keys and texts (0-79 B and 0-5000 B): %d of %d differ\n", differ, compared);
  for (const std::size_t size : {200u, 1024u, 4096u}) {
    std::string text;
    while (text.size() < size) text += "{\"compression\":{\"method\":\"powersgd\",\"rank\":4},\"lr\":0.1,";
    text.resize(size);
    const double ours = ns_per_hash(siphash24, key, text), theirs = ns_per_hash(sodium, key, text);
    std::printf("%5zu B: ours %7.1f ns, libsodium %7.1f ns (ours / libsodium %.2f)\n", size, ours, theirs,
                ours / theirs);
  }
}

#include "db/config_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "db/json_text.h"
#include "db/store.h"

namespace commtune::db {

namespace {

struct InstalledCheck {
  ConfigCheck check;
  CheckIdentity identity;
};

InstalledCheck& installed() {
  static InstalledCheck check;
  return check;
}

// The secret in `file`: 32 hex digits and an optional newline, in a plain
// file of this user's that no one else can read or write; else "".
std::string read_secret(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not hang us
  if (fd < 0) return "";
  struct stat about {};
  char text[34] = {};
  ssize_t size = -1;
  if (::fstat(fd, &about) == 0 && S_ISREG(about.st_mode) && about.st_uid == ::geteuid() &&
      (about.st_mode & 077) == 0)
    size = ::read(fd, text, sizeof text);  // at most one byte more than a secret and its newline
  ::close(fd);
  const std::string_view secret(text, size == 33 && text[32] == '\n' ? 32 : std::max<ssize_t>(size, 0));
  if (secret.size() != 32) return "";
  for (const char c : secret)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
  return std::string(secret);
}

// A new secret, written beside `file` and linked to it: of processes making
// one at once, the first link wins and every one reads the winner's.
std::string make_secret(const std::string& file) {
  unsigned char random[16];
  std::ifstream source("/dev/urandom", std::ios::binary);
  if (!source.read(reinterpret_cast<char*>(random), sizeof random)) return "";
  std::string secret;
  for (const auto byte : random) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", byte);
    secret += hex;
  }
  secret += '\n';
  const auto draft = file + "." + std::to_string(::getpid());
  const int fd = ::open(draft.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "";
  const bool written = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()) &&
                       ::fsync(fd) == 0;  // whole on disk before anyone can read it
  ::close(fd);
  if (written) (void)::link(draft.c_str(), file.c_str());  // fails when another process linked first: fine
  ::unlink(draft.c_str());
  return read_secret(file);
}

}  // namespace

void install_config_check(ConfigCheck check, CheckIdentity identity) {
  installed() = {std::move(check), std::move(identity)};
}

const std::string& stamp_secret() {
  static const std::string secret = []() -> std::string {
    const char* xdg = std::getenv("XDG_DATA_HOME");
    const char* home = std::getenv("HOME");
    if (!(xdg && *xdg) && !(home && *home)) return "";  // no folder of the user's to keep it in
    const auto file = (user_data_folder() / "stamp.key").string();
    auto found = read_secret(file);
    return found.empty() ? make_secret(file) : found;
  }();
  return secret;
}

std::string installed_check_identity() {
  const auto& check = installed();
  if (!check.check || !check.identity || stamp_secret().empty()) return "";
  return check.identity();
}

// Not libsodium's crypto_shorthash_siphash24: the same bits at the same speed (200 B - 4 KB: 0.92-1.12x its time,
// bench/byhand/siphash_bench.cpp, 2026-12-02), without libsodium-dev to build and libsodium23 for every program
// that links the store.
std::uint64_t siphash24(const std::array<unsigned char, 16>& key, std::string_view text) {
  const auto word = [](const unsigned char* bytes) {
    // Little-endian on any host; written as eight shifted bytes, which compilers turn into one load.
    return std::uint64_t{bytes[0]} | std::uint64_t{bytes[1]} << 8 | std::uint64_t{bytes[2]} << 16 |
           std::uint64_t{bytes[3]} << 24 | std::uint64_t{bytes[4]} << 32 | std::uint64_t{bytes[5]} << 40 |
           std::uint64_t{bytes[6]} << 48 | std::uint64_t{bytes[7]} << 56;
  };
  const auto rotl = [](std::uint64_t x, int b) { return x << b | x >> (64 - b); };
  const std::uint64_t k0 = word(key.data()), k1 = word(key.data() + 8);
  std::uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  std::uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  const auto rounds = [&](int n) {
    for (int i = 0; i < n; ++i) {
      v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
      v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
      v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
      v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
    }
  };
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t full = text.size() / 8 * 8;
  for (std::size_t at = 0; at < full; at += 8) {
    const auto m = word(bytes + at);
    v3 ^= m, rounds(2), v0 ^= m;
  }
  unsigned char last[8] = {};
  std::memcpy(last, bytes + full, text.size() - full);
  const auto b = word(last) | static_cast<std::uint64_t>(text.size()) << 56;
  v3 ^= b, rounds(2), v0 ^= b;
  v2 ^= 0xff, rounds(4);
  return v0 ^ v1 ^ v2 ^ v3;
}

std::string config_stamp(const std::string& identity, std::string_view text) {
  static const auto key = [] {
    std::array<unsigned char, 16> bytes{};
    const auto& secret = stamp_secret();
    for (std::size_t i = 0; i < bytes.size() && 2 * i + 1 < secret.size(); ++i)
      bytes[i] = static_cast<unsigned char>(std::stoi(secret.substr(2 * i, 2), nullptr, 16));
    return bytes;
  }();
  const auto hash = siphash24(key, text);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return identity + ":" + hex;
}

std::optional<std::string> stamp_for(const nlohmann::json& config, const std::string& text) {
  const auto identity = installed_check_identity();
  if (identity.empty()) return std::nullopt;
  try {
    // Unchanged to the byte: a real written as an integer (1 == 1.0 for JSON's ==) is not passed as is.
    if (installed().check(config).dump() != text) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return config_stamp(identity, text);
}

StoredConfig read_stored_config(const std::string& text, const std::string& stamp, const std::string& identity) {
  StoredConfig out;
  try {
    auto parsed = parse_json_text(text);
    if (!parsed.problem.empty()) throw std::runtime_error("not JSON: " + parsed.problem);
    auto& json = parsed.json;
    if (!json.is_object()) throw std::runtime_error("not a JSON object");
    const bool passed = !identity.empty() && stamp == config_stamp(identity, text);
    out.config = installed().check && !passed ? installed().check(json) : std::move(json);
  } catch (const std::exception& e) {
    out.config = nlohmann::json::object();
    out.problem = e.what();
  }
  return out;
}

}  // namespace commtune::db

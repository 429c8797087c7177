#include "db/config_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
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

std::uint64_t fnv1a(std::uint64_t hash, std::string_view bytes) {
  for (const unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

// The secret in `file`: 32 hex digits and an optional newline, else "".
std::string read_secret(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char text[34] = {};
  in.read(text, sizeof text);  // at most one byte more than a secret and its newline
  const auto size = static_cast<std::size_t>(in.gcount());
  const std::string_view secret(text, size == 33 && text[32] == '\n' ? 32 : size);
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
  const bool written = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
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
  static const std::string secret = [] {
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

std::string config_stamp(const std::string& identity, std::string_view text) {
  auto hash = fnv1a(14695981039346656037ull, stamp_secret());
  hash = fnv1a(fnv1a(hash, "\n"), text);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return identity + ":" + hex;
}

std::optional<std::string> stamp_for(const nlohmann::json& config, const std::string& text) {
  const auto identity = installed_check_identity();
  if (identity.empty()) return std::nullopt;
  try {
    if (installed().check(config) != config) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return config_stamp(identity, text);
}

StoredConfig read_stored_config(const std::string& text, const std::string& stamp, const std::string& identity) {
  StoredConfig out;
  try {
    auto json = text.empty() ? nlohmann::json() : parse_bounded_json(text);
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

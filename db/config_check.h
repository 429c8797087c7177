// How the store reads a run's configuration: the store holds what any
// process wrote, and a file can be edited or come from elsewhere, so each
// configuration is checked as it is read and one bad row is shown as such
// instead of breaking every reader. The check returns the configuration to
// use (normalised) or throws with why it is none. The engine installs the
// schema's (core/config); without one, a configuration must be a JSON object.
//
// Checking costs more than reading (a third of reading a sweep of 10^5
// runs), and what the store writes was checked as it was written: a
// configuration that the check returns unchanged is stored with a stamp, and
// read again under the same check and by the same user it is parsed without
// being checked. The stamp is the check's identity (core/config: the builds
// of the code that checks, the engine's and its plugins', and the schema)
// and the text's hash keyed with a secret of this user's. A text edited since,
// another build, other plugins, a store stamped by someone else (a file from
// elsewhere cannot carry stamps this user trusts) and rows written before
// stamps (store schema version 5) are checked as before.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace commtune::db {

using ConfigCheck = std::function<nlohmann::json(const nlohmann::json&)>;
// Names the check exactly; "" names nothing, and then nothing is stamped or trusted.
using CheckIdentity = std::function<std::string()>;
void install_config_check(ConfigCheck check, CheckIdentity identity = {});

// The installed check's identity now: "" without a check, an identity, or
// this user's secret (stamp_secret()).
std::string installed_check_identity();

// "IDENTITY:HASH": HASH the text's SipHash-2-4 keyed with this user's
// secret, in 16 hex digits (a keyed hash: stamps seen do not give away how
// to stamp another text).
std::string config_stamp(const std::string& identity, std::string_view text);
// SipHash-2-4 (Aumasson and Bernstein, 2012) of `text` under a 128-bit key.
std::uint64_t siphash24(const std::array<unsigned char, 16>& key, std::string_view text);

// The stamp to store a configuration with (`text`, its dump): none unless
// the installed check has an identity and returns the configuration unchanged.
std::optional<std::string> stamp_for(const nlohmann::json& config, const std::string& text);

struct StoredConfig {
  nlohmann::json config;  // {} when it is none
  std::string problem;    // why it is none ("" when it is one)
};
// A stored text through the installed check, unless `stamp` is the one
// config_stamp(identity, text) gives (identity: installed_check_identity()).
StoredConfig read_stored_config(const std::string& text, const std::string& stamp, const std::string& identity);

// 32 hex digits kept in the user's data folder ($XDG_DATA_HOME or
// ~/.local/share, /commtune/stamp.key), made on first use and readable by
// the user alone; "" when there is no such folder, it cannot hold the key,
// or the file there is not a key of this user's alone.
const std::string& stamp_secret();

}  // namespace commtune::db

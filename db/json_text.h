// JSON from outside (event messages, configuration and summary files, the
// store's own rows), parsed with a bound on its nesting. nlohmann's
// serializer and several readers recurse once per level: a document nested
// a million deep is a crash, not an error, unless it is refused first.
// Header-only (nlohmann alone), in the store library, the lowest layer that
// reads such JSON: the engine above it includes it from here.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace commtune {

// Deeper than anything commtune writes (a run_start message nests 4 deep).
inline constexpr int kMaxJsonDepth = 64;

// How deep arrays and objects nest in `text`, counted without parsing
// (brackets inside strings skipped); stops counting past `limit`.
inline int json_nesting_depth(std::string_view text, int limit = kMaxJsonDepth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// `text` as JSON, or a discarded value (is_discarded()) when it is not JSON
// or nests deeper than `max_depth`.
inline nlohmann::json parse_bounded_json(std::string_view text, int max_depth = kMaxJsonDepth) {
  if (json_nesting_depth(text, max_depth) > max_depth) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
}

}  // namespace commtune

// JSON compared as the store's readers need it compared.
//
// Whether two JSON values are one value, to the type and the bit:
// nlohmann's == holds 1, 1u and 1.0 equal, and 0.0 and -0.0, and no two
// discarded values (a failed parse) equal.
#pragma once

#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "db/json_text.h"

namespace commtune::testing {

inline bool same_json(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case nlohmann::json::value_t::object: {
      if (a.size() != b.size()) return false;
      for (auto x = a.begin(), y = b.begin(); x != a.end(); ++x, ++y)
        if (x.key() != y.key() || !same_json(*x, *y)) return false;
      return true;
    }
    case nlohmann::json::value_t::array: {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!same_json(a[i], b[i])) return false;
      return true;
    }
    case nlohmann::json::value_t::number_float: {
      const double x = a.get<double>(), y = b.get<double>();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case nlohmann::json::value_t::discarded:
      return true;
    default:
      return a == b;
  }
}

// How many object members `json` holds, at every depth.
inline std::size_t member_count(const nlohmann::json& json) {
  std::size_t n = json.is_object() ? json.size() : 0;
  if (json.is_structured())
    for (const auto& item : json) n += member_count(item);
  return n;
}

// What parse_bounded_json must give for `text`, found another way: nlohmann's
// parser, with a text that nests too deep or repeats a key in an object
// (more keys read than members kept) discarded.
inline nlohmann::json reference_json(std::string_view text, int max_depth) {
  const auto discarded = nlohmann::json(nlohmann::json::value_t::discarded);
  if (json_nesting_depth(text, max_depth) > max_depth) return discarded;
  std::size_t keys = 0;
  auto json = nlohmann::json::parse(
      text, [&](int, nlohmann::json::parse_event_t event, nlohmann::json&) {
        keys += event == nlohmann::json::parse_event_t::key;
        return true;
      },
      /*allow_exceptions=*/false, /*ignore_comments=*/true);
  return json.is_discarded() || keys != member_count(json) ? discarded : json;
}

}  // namespace commtune::testing

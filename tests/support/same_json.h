// Whether two JSON values are one value, to the type and the bit:
// nlohmann's == holds 1, 1u and 1.0 equal, and 0.0 and -0.0, and no two
// discarded values (a failed parse) equal.
#pragma once

#include <cstring>

#include <nlohmann/json.hpp>

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

}  // namespace commtune::testing

#include "core/tuner/schema/param_schema.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace commtune {

namespace {

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::floor(v) == v && std::fabs(v) < 1e16) return std::to_string(static_cast<long long>(v));
  std::ostringstream s;
  s.precision(12);
  s << v;
  return s.str();
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string range_words(const Range& r) {
  const bool has_min = std::isfinite(r.min), has_max = std::isfinite(r.max);
  if (has_min && has_max) {
    if (!r.open_min && !r.open_max) return "from " + format_number(r.min) + " to " + format_number(r.max);
    return std::string("in ") + (r.open_min ? "(" : "[") + format_number(r.min) + ", " + format_number(r.max) +
           (r.open_max ? ")" : "]");
  }
  if (has_min) return (r.open_min ? "> " : ">= ") + format_number(r.min);
  if (has_max) return (r.open_max ? "< " : "<= ") + format_number(r.max);
  return "";
}

std::string describe(const nlohmann::json& value) {
  auto text = value.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

const char* to_string(ParamKind kind) {
  switch (kind) {
    case ParamKind::Boolean:
      return "bool";
    case ParamKind::Integer:
      return "int";
    case ParamKind::Real:
      return "float";
    case ParamKind::Text:
      return "string";
    case ParamKind::Choice:
      return "choice";
    case ParamKind::Scalar:
      return "scalar";
  }
  return "?";
}

bool Range::contains(double v) const { return contains(static_cast<long double>(v)); }

bool Range::contains(long double v) const {
  const long double low = min, high = max;
  if (open_min ? !(v > low) : !(v >= low)) return false;
  if (open_max ? !(v < high) : !(v <= high)) return false;
  return true;
}

std::string ParamSpec::allowed() const {
  switch (kind) {
    case ParamKind::Boolean:
      return "true or false";
    case ParamKind::Text:
      return required ? "a non-empty string" : "a string";
    case ParamKind::Choice:
      return "one of: " + join(choices);
    case ParamKind::Scalar:
      return "a finite number, a string or a boolean";
    case ParamKind::Integer:
    case ParamKind::Real: {
      const auto words = range_words(range);
      const char* noun = kind == ParamKind::Integer ? "an integer" : "a number";
      return words.empty() ? noun : std::string(noun) + " " + words;
    }
  }
  return "";
}

nlohmann::json ParamSpec::to_json() const {
  nlohmann::json j{{"name", name},
                   {"type", commtune::to_string(kind)},
                   {"default", default_value},
                   {"doc", doc},
                   {"allowed", allowed()}};
  if (kind == ParamKind::Integer || kind == ParamKind::Real) {
    if (std::isfinite(range.min)) j["min"] = range.min;
    if (std::isfinite(range.max)) j["max"] = range.max;
    if (range.open_min) j["min_exclusive"] = true;
    if (range.open_max) j["max_exclusive"] = true;
  }
  if (!choices.empty()) j["choices"] = choices;
  if (!unit.empty()) j["unit"] = unit;
  if (log_scale) j["log_scale"] = true;
  if (required) j["required"] = true;
  return j;
}

ParamSpec ParamSpec::from_json(const nlohmann::json& j) {
  const auto text = [&](const char* key, bool needed) -> std::string {
    const auto at = j.find(key);
    if (at == j.end() && !needed) return "";
    if (at == j.end() || !at->is_string()) throw std::runtime_error(std::string("a parameter's description wants a text '") + key + "'");
    return at->get<std::string>();
  };
  const auto flag = [&](const char* key) {
    const auto at = j.find(key);
    return at != j.end() && at->is_boolean() && at->get<bool>();
  };
  if (!j.is_object()) throw std::runtime_error("a parameter's description is not a JSON object");
  ParamSpec spec;
  spec.name = text("name", true);
  const auto type = text("type", true);
  const ParamKind kinds[] = {ParamKind::Boolean, ParamKind::Integer, ParamKind::Real, ParamKind::Text, ParamKind::Choice,
                            ParamKind::Scalar};
  const auto kind = std::find_if(std::begin(kinds), std::end(kinds), [&](ParamKind k) { return type == commtune::to_string(k); });
  if (kind == std::end(kinds)) throw std::runtime_error("parameter " + spec.name + " has an unknown type '" + type + "'");
  spec.kind = *kind;
  spec.default_value = j.value("default", nlohmann::json());
  spec.doc = text("doc", false);
  spec.unit = text("unit", false);
  if (const auto at = j.find("min"); at != j.end() && at->is_number()) spec.range.min = at->get<double>();
  if (const auto at = j.find("max"); at != j.end() && at->is_number()) spec.range.max = at->get<double>();
  spec.range.open_min = flag("min_exclusive");
  spec.range.open_max = flag("max_exclusive");
  if (const auto at = j.find("choices"); at != j.end()) {
    if (!at->is_array()) throw std::runtime_error("parameter " + spec.name + " has choices that are not a list");
    for (const auto& c : *at) {
      if (!c.is_string()) throw std::runtime_error("parameter " + spec.name + " has a choice that is not a text");
      spec.choices.push_back(c.get<std::string>());
    }
  }
  spec.log_scale = flag("log_scale");
  spec.required = flag("required");
  check_param(spec, spec.default_value, spec.name);  // a default its own declaration refuses is no declaration
  return spec;
}

ConfigError::ConfigError(std::string field, const std::string& problem)
    : std::runtime_error(field.empty() ? problem : field + ": " + problem), field_(std::move(field)), problem_(problem) {}

ConfigError ConfigError::within(const std::string& prefix) const {
  return ConfigError(field_.empty() ? prefix : prefix + "." + field_, problem_);
}

nlohmann::json check_param(const ParamSpec& spec, const nlohmann::json& value, const std::string& path) {
  auto fail = [&](const std::string& why) -> nlohmann::json {
    throw ConfigError(path, why + "; allowed: " + spec.allowed());
  };
  switch (spec.kind) {
    case ParamKind::Boolean:
      if (!value.is_boolean()) return fail(describe(value) + " is not a boolean");
      return value;
    case ParamKind::Text:
      if (!value.is_string()) return fail(describe(value) + " is not a string");
      return value;
    case ParamKind::Choice: {
      if (!value.is_string()) return fail(describe(value) + " is not a string");
      const auto& text = value.get_ref<const std::string&>();
      if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        const auto hint = closest_name(text, spec.choices);
        return fail("'" + text + "' is not a valid choice" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      }
      return value;
    }
    case ParamKind::Integer: {
      if (!value.is_number()) return fail(describe(value) + " is not a number");
      if (value.is_number_float()) {
        const double v = value.get<double>();
        if (std::floor(v) != v || !std::isfinite(v)) return fail(describe(value) + " is not an integer");
        // 2^63 and beyond do not fit the 64-bit integer every setting is kept in.
        if (!spec.range.contains(v) || std::fabs(v) >= 0x1p63) return fail(describe(value) + " is out of range");
        return nlohmann::json(static_cast<std::int64_t>(v));
      }
      // Compared exactly: as a double, 2^53 + 1 would pass a range ending at 2^53.
      const long double exact = value.is_number_unsigned() ? static_cast<long double>(value.get<std::uint64_t>())
                                                           : static_cast<long double>(value.get<std::int64_t>());
      if (!spec.range.contains(exact) || exact >= 0x1p63L) return fail(describe(value) + " is out of range");
      return value;
    }
    case ParamKind::Scalar:
      if (value.is_string() || value.is_boolean()) return value;
      if (!value.is_number()) return fail(describe(value) + " is not a scalar");
      if (value.is_number_float() && !std::isfinite(value.get<double>())) return fail(describe(value) + " is not finite");
      return value;
    case ParamKind::Real: {
      if (!value.is_number()) return fail(describe(value) + " is not a number");
      const double v = value.get<double>();
      if (!std::isfinite(v)) return fail(describe(value) + " is not finite");
      if (!spec.range.contains(v)) return fail(describe(value) + " is out of range");
      return nlohmann::json(v);
    }
  }
  return value;
}

nlohmann::json parse_param_text(const ParamSpec& spec, std::string_view text, const std::string& path) {
  auto fail = [&]() -> nlohmann::json {
    throw ConfigError(path, "'" + std::string(text) + "' is not valid; allowed: " + spec.allowed());
  };
  switch (spec.kind) {
    case ParamKind::Text:
    case ParamKind::Choice:
      return check_param(spec, std::string(text), path);
    case ParamKind::Boolean: {
      const auto t = lower(text);
      if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
      if (t == "false" || t == "0" || t == "no" || t == "off") return false;
      return fail();
    }
    case ParamKind::Integer:
    case ParamKind::Real: {
      const auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_number()) return fail();
      return check_param(spec, parsed, path);
    }
    case ParamKind::Scalar: {  // a number or boolean where the text is one, else the text itself
      const auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_number() || parsed.is_boolean()) return check_param(spec, parsed, path);
      return std::string(text);
    }
  }
  return fail();
}

std::string closest_name(std::string_view wanted, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, wanted.size() / 3) + 1;
  for (const auto& name : names) {
    const auto d = edit_distance(lower(wanted), lower(name));
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

const ParamSpec* ParamSet::find(std::string_view name) const {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

void check_known_keys(const nlohmann::json& object, const std::string& path, const std::vector<const ParamSet*>& sets,
                      const std::vector<std::string>& extra_keys) {
  if (!object.is_object()) throw ConfigError(path, describe(object) + " is not a JSON object");
  const auto known = [&](const std::string& key) {
    return std::find(extra_keys.begin(), extra_keys.end(), key) != extra_keys.end() ||
           std::any_of(sets.begin(), sets.end(), [&](const ParamSet* set) { return set->find(key) != nullptr; });
  };
  for (const auto& item : object.items()) {
    if (known(item.key())) continue;
    std::vector<std::string> names = extra_keys;
    for (const auto* set : sets)
      for (const auto& s : set->specs) names.push_back(s.name);
    const auto hint = closest_name(item.key(), names);
    std::sort(names.begin(), names.end());
    throw ConfigError(
        join_path(path, item.key()),
        "unknown parameter" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; known here: " + join(names));
  }
}

std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

}  // namespace commtune

// The one parameter schema: every tunable value of a hook, model, dataset,
// optimizer or run is declared once, with its type, default, range, unit and
// doc. JSON validation, `--set` overrides, CLI listings, GUI forms and sweep
// axes all read these declarations.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

// Scalar: a number, text or boolean, kept as given (a script's own argument,
// whose type only the script knows).
enum class ParamKind { Boolean, Integer, Real, Text, Choice, Scalar };
const char* to_string(ParamKind kind);

// An inclusive range by default; `open_min`/`open_max` exclude the bound.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool open_min = false;
  bool open_max = false;

  static Range at_least(double v) { return {v}; }
  static Range above(double v) { return {v, std::numeric_limits<double>::infinity(), true}; }
  bool contains(double v) const;
  // Exactly, for any 64-bit integer: 2^53 + 1 is not 2^53 here.
  bool contains(long double v) const;
};

struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::Text;
  nlohmann::json default_value;
  Range range;
  std::vector<std::string> choices;
  std::string unit;
  std::string doc;
  bool log_scale = false;  // a hint for sweep axes and GUI sliders
  bool required = false;   // text that must be given (no usable default)

  // What the value may be, in words: "an integer from 1 to 64", "one of: a, b".
  std::string allowed() const;
  nlohmann::json to_json() const;
  // What to_json() wrote, back. Throws std::runtime_error when it is not one.
  static ParamSpec from_json(const nlohmann::json& j);
};

// A configuration error names the field (dotted path) and what it accepts.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string field, const std::string& problem);
  const std::string& field() const { return field_; }
  const std::string& problem() const { return problem_; }
  // The same error for a configuration nested under `prefix` (base.hook.name).
  ConfigError within(const std::string& prefix) const;

 private:
  std::string field_;
  std::string problem_;
};

// Checks a JSON value against the spec and returns it normalised (3.0 -> 3 for
// an integer). Throws ConfigError naming `path`.
nlohmann::json check_param(const ParamSpec& spec, const nlohmann::json& value, const std::string& path);

// Parses the text of a command-line override (`--set path=text`) for the spec.
nlohmann::json parse_param_text(const ParamSpec& spec, std::string_view text, const std::string& path);

// The closest name by edit distance, or "" when none is close.
std::string closest_name(std::string_view wanted, const std::vector<std::string>& names);

// A type-erased schema: the declarations plus a function that reads the
// declared keys of a JSON object, fills defaults and validates.
struct ParamSet {
  std::vector<ParamSpec> specs;
  std::function<nlohmann::json(const nlohmann::json& object, const std::string& path)> normalize;
  // Whether normalize checks more than the declarations say (in code: how
  // fields relate, a text's format), which only the code that declared it can.
  bool checked_in_code = false;

  const ParamSpec* find(std::string_view name) const;
};

// Throws if `object` has a key that none of `sets` declares (nor `extra_keys`).
void check_known_keys(const nlohmann::json& object, const std::string& path, const std::vector<const ParamSet*>& sets,
                      const std::vector<std::string>& extra_keys = {});

// Joins a section path and a key: ("hook", "rank") -> "hook.rank"; ("", "steps") -> "steps".
std::string join_path(const std::string& path, std::string_view key);

// Binds declarations to the fields of an options struct, so a parameter's name
// is written once and its value lands in a typed field. Defaults are the
// struct's own member initialisers.
template <class Options>
class Schema {
  struct Binding {
    ParamSpec spec;
    std::function<void(Options&, const nlohmann::json&)> assign;
    std::function<nlohmann::json(const Options&)> value;
    std::function<void(const Options&)> check;  // a format beyond the kind's
  };

 public:
  Schema& flag(std::string name, bool Options::*field, std::string doc) {
    return bind(std::move(name), ParamKind::Boolean, field, {}, {}, "", std::move(doc));
  }
  Schema& integer(std::string name, std::int64_t Options::*field, Range range, std::string unit, std::string doc) {
    return bind(std::move(name), ParamKind::Integer, field, range, {}, std::move(unit), std::move(doc));
  }
  Schema& real(std::string name, double Options::*field, Range range, std::string unit, std::string doc,
               bool log_scale = false) {
    bind(std::move(name), ParamKind::Real, field, range, {}, std::move(unit), std::move(doc));
    bindings_.back().spec.log_scale = log_scale;
    return *this;
  }
  Schema& text(std::string name, std::string Options::*field, std::string doc) {
    return bind(std::move(name), ParamKind::Text, field, {}, {}, "", std::move(doc));
  }
  // Text with a format of its own: `check` throws ConfigError when the text is
  // not in it, so nothing downstream (a generated file) sees a text it refuses.
  Schema& text_checked(std::string name, std::string Options::*field, std::function<void(const std::string&)> check,
                       std::string doc) {
    text(std::move(name), field, std::move(doc));
    bindings_.back().check = [field, check = std::move(check)](const Options& o) { check(o.*field); };
    return *this;
  }
  // Text the user must give: a configuration without it is refused by name
  // when it is read, not later by whatever needed it.
  Schema& required_text(std::string name, std::string Options::*field, std::string doc) {
    text(std::move(name), field, std::move(doc));
    bindings_.back().spec.required = true;
    return *this;
  }
  Schema& choice(std::string name, std::string Options::*field, std::vector<std::string> choices, std::string doc) {
    return bind(std::move(name), ParamKind::Choice, field, {}, std::move(choices), "", std::move(doc));
  }

  std::vector<ParamSpec> specs() const {
    std::vector<ParamSpec> out;
    out.reserve(bindings_.size());
    for (const auto& b : bindings_) out.push_back(b.spec);
    return out;
  }

  // Reads the keys this schema declares; other keys are left to the caller.
  Options read(const nlohmann::json& object, const std::string& path) const {
    Options options{};
    for (const auto& b : bindings_) {
      auto it = object.find(b.spec.name);
      if (it == object.end()) continue;
      try {  // the path is written only for the error: every stored run a listing reads comes through here
        b.assign(options, check_param(b.spec, *it, ""));
      } catch (const ConfigError& e) {
        throw e.within(join_path(path, b.spec.name));
      }
      if (b.check) b.check(options);
    }
    for (const auto& b : bindings_)
      if (b.spec.required && b.value(options) == "")
        throw ConfigError(join_path(path, b.spec.name), "required here (" + b.spec.doc + ")");
    return options;
  }

  nlohmann::json write(const Options& options) const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& b : bindings_) out[b.spec.name] = b.value(options);
    return out;
  }

  ParamSet erase() const {
    ParamSet set{specs(), [schema = *this](const nlohmann::json& object, const std::string& path) {
                   return schema.write(schema.read(object, path));
                 }};
    for (const auto& b : bindings_) set.checked_in_code = set.checked_in_code || bool(b.check);
    return set;
  }


 private:
  template <class T>
  Schema& bind(std::string name, ParamKind kind, T Options::*field, Range range, std::vector<std::string> choices,
               std::string unit, std::string doc) {
    ParamSpec spec;
    spec.name = std::move(name);
    spec.kind = kind;
    spec.default_value = Options{}.*field;
    spec.range = range;
    spec.choices = std::move(choices);
    spec.unit = std::move(unit);
    spec.doc = std::move(doc);
    check_param(spec, spec.default_value, spec.name);  // a default outside its own range is a programming error
    bindings_.push_back({std::move(spec), [field](Options& o, const nlohmann::json& v) { o.*field = v.get<T>(); },
                         [field](const Options& o) { return nlohmann::json(o.*field); }, {}});
    return *this;
  }

  std::vector<Binding> bindings_;
};

}  // namespace commtune

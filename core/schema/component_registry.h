// Named components of one config section ("model", "data", "optimizer",
// "hook"), each with its own parameter set, plus parameters common to every
// entry of the section. Built-ins and plugins register here alike.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/schema/param_schema.h"

namespace commtune {

// Options may check relations between their fields (`void validate() const`,
// throwing ConfigError); they are checked when a configuration is parsed.
template <class Options, class = void>
struct has_validate : std::false_type {};
template <class Options>
struct has_validate<Options, std::void_t<decltype(std::declval<const Options&>().validate())>> : std::true_type {};

template <class Options>
ParamSet validated_param_set(const Schema<Options>& schema) {
  auto set = schema.erase();
  if constexpr (has_validate<Options>::value)
    set.normalize = [schema](const nlohmann::json& object, const std::string& path) {
      const auto options = schema.read(object, path);
      options.validate();
      return schema.write(options);
    };
  return set;
}

template <class Product, class... Args>
class ComponentRegistry {
 public:
  struct Entry {
    std::string name;
    std::string doc;
    ParamSet params;
    std::function<std::unique_ptr<Product>(const nlohmann::json& section, Args...)> create;
  };

  ComponentRegistry(std::string section, std::string default_name, ParamSet common = {})
      : section_(std::move(section)), default_name_(std::move(default_name)), common_(std::move(common)) {}

  // `make(const Options&, Args...)` builds the product from its typed options;
  // the options come from `Options::schema()`.
  template <class Options, class Make>
  void add(std::string name, std::string doc, Make make) {
    for (const auto& e : entries_)
      if (e.name == name) throw std::logic_error(section_ + " '" + name + "' is registered twice");
    entries_.push_back(make_entry<Options>(std::move(name), std::move(doc), std::move(make)));
  }

  // Registers an entry again in its place, its parameters read anew from
  // Options::schema() (whose choices may have grown: compressors from plugins).
  template <class Options, class Make>
  void replace(const std::string& name, std::string doc, Make make) {
    for (auto& e : entries_)
      if (e.name == name) {
        e = make_entry<Options>(name, std::move(doc), std::move(make));
        return;
      }
    throw std::logic_error(section_ + " '" + name + "' is not registered");
  }

  const std::string& section() const { return section_; }
  const std::string& default_name() const { return default_name_; }
  const ParamSet& common() const { return common_; }
  const std::vector<Entry>& entries() const { return entries_; }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }

  // The `name` key as a parameter: a choice among the registered entries.
  ParamSpec name_spec() const {
    ParamSpec spec;
    spec.name = "name";
    spec.kind = ParamKind::Choice;
    spec.default_value = default_name_;
    spec.choices = names();
    spec.doc = "which " + section_ + " to use";
    return spec;
  }

  const Entry& entry(const std::string& name) const {
    for (const auto& e : entries_)
      if (e.name == name) return e;
    check_param(name_spec(), name, join_path(section_, "name"));  // throws with the list of names
    throw ConfigError(join_path(section_, "name"), "unknown " + section_ + " '" + name + "'");
  }

  std::string selected_name(const nlohmann::json& section) const {
    if (!section.is_object()) throw ConfigError(section_, section.dump() + " is not a JSON object");
    auto it = section.find("name");
    if (it == section.end()) return default_name_;
    if (it->is_string())  // a registered name, as nearly always: no choice spec built to say so
      for (const auto& e : entries_)
        if (e.name == it->template get_ref<const std::string&>()) return e.name;
    return check_param(name_spec(), *it, join_path(section_, "name")).template get<std::string>();
  }

  // Validates a section object and returns it with every default filled in.
  nlohmann::json normalize(const nlohmann::json& section) const {
    const auto& e = entry(selected_name(section));
    check_known_keys(section, section_, {&common_, &e.params}, {"name"});
    nlohmann::json out = {{"name", e.name}};
    const auto take = [&out](nlohmann::json values) {
      for (auto& [key, value] : values.items()) out[key] = std::move(value);
    };
    if (common_.normalize) take(common_.normalize(section, section_));
    take(e.params.normalize(section, section_));
    return out;
  }

  std::unique_ptr<Product> create(const nlohmann::json& normalized_section, Args... args) const {
    return entry(selected_name(normalized_section)).create(normalized_section, args...);
  }

  // The declaration behind `key` in this section, given the entry the section selects.
  const ParamSpec* find_spec(const nlohmann::json& section, std::string_view key) const {
    if (const auto* s = common_.find(key)) return s;
    return entry(selected_name(section)).params.find(key);
  }

  nlohmann::json describe() const {
    nlohmann::json j{{"section", section_},
                     {"default", default_name_},
                     {"common", nlohmann::json::array()},
                     {"entries", nlohmann::json::array()}};
    for (const auto& s : common_.specs) j["common"].push_back(s.to_json());
    for (const auto& e : entries_) {
      nlohmann::json params = nlohmann::json::array();
      for (const auto& s : e.params.specs) params.push_back(s.to_json());
      j["entries"].push_back({{"name", e.name}, {"doc", e.doc}, {"params", params}});
    }
    return j;
  }

 private:
  template <class Options, class Make>
  static Entry make_entry(std::string name, std::string doc, Make make) {
    const auto schema = Options::schema();
    return Entry{std::move(name), std::move(doc), validated_param_set(schema),
                 [schema, make](const nlohmann::json& section, Args... args) -> std::unique_ptr<Product> {
                   return make(schema.read(section, ""), args...);
                 }};
  }
  std::string section_;
  std::string default_name_;
  ParamSet common_;
  std::vector<Entry> entries_;
};

}  // namespace commtune

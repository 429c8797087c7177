// The components of one config section ("model", "data", "optimizer",
// "hook") with how to build each: its schema (core/tuner/schema/section_schema.h)
// and a factory per entry. Built-ins and plugins register here alike.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tuner/schema/section_schema.h"

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
  if constexpr (has_validate<Options>::value) set.checked_in_code = true;
  if constexpr (has_validate<Options>::value)
    set.normalize = [schema](const nlohmann::json& object, const std::string& path) {
      const auto options = schema.read(object, path);
      options.validate();
      return schema.write(options);
    };
  return set;
}

template <class Product, class... Args>
class ComponentRegistry : public SectionSchema {
 public:
  using SectionSchema::SectionSchema;

  // `make(const Options&, Args...)` builds the product from its typed options;
  // the options come from `Options::schema()`.
  template <class Options, class Make>
  void add(std::string name, std::string doc, Make make) {
    const auto schema = Options::schema();
    add_entry({std::move(name), std::move(doc), validated_param_set(schema)});
    factories_.push_back(factory<Options>(schema, std::move(make)));
  }

  // Registers an entry again in its place, its parameters read anew from
  // Options::schema() (whose choices may have grown: compressors from plugins).
  template <class Options, class Make>
  void replace(const std::string& name, std::string doc, Make make) {
    const auto index = index_of(name);
    const auto schema = Options::schema();
    mutable_entries()[index] = {name, std::move(doc), validated_param_set(schema)};
    factories_[index] = factory<Options>(schema, std::move(make));
  }

  std::unique_ptr<Product> create(const nlohmann::json& normalized_section, Args... args) const {
    return factories_[index_of(selected_name(normalized_section))](normalized_section, args...);
  }

 private:
  using Factory = std::function<std::unique_ptr<Product>(const nlohmann::json& section, Args...)>;
  template <class Options, class Make>
  static Factory factory(const Schema<Options>& schema, Make make) {
    return [schema, make = std::move(make)](const nlohmann::json& section, Args... args) -> std::unique_ptr<Product> {
      return make(schema.read(section, ""), args...);
    };
  }
  std::vector<Factory> factories_;  // by entry index
};

}  // namespace commtune

// One section of a configuration that names a component ("model", "data",
// "optimizer", "hook"): the components it may name, each with its doc and
// parameters, and the parameters common to every one. What validates the
// section. The engine's registries (core/engine/component_registry.h) are
// these with a factory per component; the tuner reads the same schema as the
// engine describes it (core/tuner/config/components.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/tuner/schema/param_schema.h"

namespace commtune {

class SectionSchema {
 public:
  struct Entry {
    std::string name;
    std::string doc;
    ParamSet params;
  };

  SectionSchema(std::string section, std::string default_name, ParamSet common = {})
      : section_(std::move(section)), default_name_(std::move(default_name)), common_(std::move(common)) {}

  // A section as describe() writes it, each parameter checked by its
  // declaration (kind, range, choices, required). Throws std::runtime_error
  // naming what in the description is not one.
  static SectionSchema from_description(const nlohmann::json& description);

  const std::string& section() const { return section_; }
  const std::string& default_name() const { return default_name_; }
  const ParamSet& common() const { return common_; }
  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<std::string> names() const;

  // The `name` key as a parameter: a choice among the entries.
  ParamSpec name_spec() const;
  // Throws ConfigError with the names there are.
  const Entry& entry(const std::string& name) const;
  std::string selected_name(const nlohmann::json& section) const;
  // Validates a section object and returns it with every default filled in.
  nlohmann::json normalize(const nlohmann::json& section) const;
  // The declaration behind `key` in this section, given the entry the section selects.
  const ParamSpec* find_spec(const nlohmann::json& section, std::string_view key) const;
  nlohmann::json describe() const;

 protected:
  // The entry's index; throws std::logic_error when the name is taken.
  std::size_t add_entry(Entry entry);
  // The index of the entry named so; throws std::logic_error when there is none.
  std::size_t index_of(const std::string& name) const;
  std::vector<Entry>& mutable_entries() { return entries_; }

 private:
  std::string section_;
  std::string default_name_;
  ParamSet common_;
  std::vector<Entry> entries_;
};

}  // namespace commtune

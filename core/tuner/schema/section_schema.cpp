#include "core/tuner/schema/section_schema.h"

#include <stdexcept>

namespace commtune {

namespace {

ParamSet described_param_set(const nlohmann::json& specs, const std::string& where) {
  if (!specs.is_array()) throw std::runtime_error(where + " is not a list of parameters");
  ParamSet set;
  for (const auto& s : specs) set.specs.push_back(ParamSpec::from_json(s));
  set.normalize = [specs = set.specs](const nlohmann::json& object, const std::string& path) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& spec : specs) {
      const auto at = object.find(spec.name);
      out[spec.name] = at == object.end() ? spec.default_value : check_param(spec, *at, join_path(path, spec.name));
      if (spec.required && out[spec.name] == "")
        throw ConfigError(join_path(path, spec.name), "required here (" + spec.doc + ")");
    }
    return out;
  };
  return set;
}

}  // namespace

SectionSchema SectionSchema::from_description(const nlohmann::json& d) {
  if (!d.is_object() || !d.contains("section") || !d["section"].is_string() || !d.contains("default") ||
      !d["default"].is_string() || !d.contains("entries") || !d["entries"].is_array())
    throw std::runtime_error("a section's description wants section, default and entries");
  const auto section = d["section"].get<std::string>();
  auto common = described_param_set(d.value("common", nlohmann::json::array()), section + ".common");
  common.checked_in_code = d.value("common_checks_in_code", false);
  SectionSchema out(section, d["default"].get<std::string>(), std::move(common));
  for (const auto& e : d["entries"]) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string())
      throw std::runtime_error("an entry of " + section + " has no name");
    const auto name = e["name"].get<std::string>();
    auto params = described_param_set(e.value("params", nlohmann::json::array()), section + " " + name);
    params.checked_in_code = e.value("checks_in_code", false);
    out.add_entry({name, e.value("doc", std::string()), std::move(params)});
  }
  return out;
}

std::vector<std::string> SectionSchema::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

ParamSpec SectionSchema::name_spec() const {
  ParamSpec spec;
  spec.name = "name";
  spec.kind = ParamKind::Choice;
  spec.default_value = default_name_;
  spec.choices = names();
  spec.doc = "which " + section_ + " to use";
  return spec;
}

const SectionSchema::Entry& SectionSchema::entry(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e;
  check_param(name_spec(), name, join_path(section_, "name"));  // throws with the list of names
  throw ConfigError(join_path(section_, "name"), "unknown " + section_ + " '" + name + "'");
}

std::string SectionSchema::selected_name(const nlohmann::json& section) const {
  if (!section.is_object()) throw ConfigError(section_, section.dump() + " is not a JSON object");
  auto it = section.find("name");
  if (it == section.end()) return default_name_;
  if (it->is_string())  // a registered name, as nearly always: no choice spec built to say so
    for (const auto& e : entries_)
      if (e.name == it->get_ref<const std::string&>()) return e.name;
  return check_param(name_spec(), *it, join_path(section_, "name")).get<std::string>();
}

nlohmann::json SectionSchema::normalize(const nlohmann::json& section) const {
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

const ParamSpec* SectionSchema::find_spec(const nlohmann::json& section, std::string_view key) const {
  if (const auto* s = common_.find(key)) return s;
  return entry(selected_name(section)).params.find(key);
}

nlohmann::json SectionSchema::describe() const {
  nlohmann::json j{{"section", section_},
                   {"default", default_name_},
                   {"common", nlohmann::json::array()},
                   {"entries", nlohmann::json::array()}};
  for (const auto& s : common_.specs) j["common"].push_back(s.to_json());
  if (common_.checked_in_code) j["common_checks_in_code"] = true;
  for (const auto& e : entries_) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& s : e.params.specs) params.push_back(s.to_json());
    j["entries"].push_back({{"name", e.name}, {"doc", e.doc}, {"params", params}});
    if (e.params.checked_in_code) j["entries"].back()["checks_in_code"] = true;
  }
  return j;
}

std::size_t SectionSchema::add_entry(Entry entry) {
  for (const auto& e : entries_)
    if (e.name == entry.name) throw std::logic_error(section_ + " '" + entry.name + "' is registered twice");
  entries_.push_back(std::move(entry));
  return entries_.size() - 1;
}

std::size_t SectionSchema::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return i;
  throw std::logic_error(section_ + " '" + name + "' is not registered");
}

}  // namespace commtune

#include "core/tuner/config/engine_check.h"

#include <mutex>
#include <stdexcept>

#include "core/tuner/config/components.h"
#include "core/tuner/launch/worker_call.h"

namespace commtune {

namespace {

bool checks_in_code(const SectionSchema& schema, const nlohmann::json& section) {
  return schema.common().checked_in_code || schema.entry(schema.selected_name(section)).params.checked_in_code;
}

}  // namespace

void EngineCheck::add_config(const RunConfig& config, const std::string& label) {
  const auto& c = components();
  const std::pair<const SectionSchema*, const nlohmann::json*> sections[] = {
      {&c.models, &config.model}, {&c.datasets, &config.data}, {&c.optimizers, &config.optimizer}, {&c.hooks, &config.hook}};
  for (const auto& [schema, value] : sections) {
    if (!checks_in_code(*schema, *value)) continue;
    nlohmann::json ask = {{"section", schema->section()}, {"value", *value}};
    if (known_.emplace("s" + ask.dump(), sections_.size()).second) {
      sections_.push_back(std::move(ask));
      labels_.push_back(label);
    }
  }
}

std::size_t EngineCheck::add_hook_size(const RunConfig& config) {
  auto ask = config.to_json();
  const auto [at, fresh] = known_.emplace("m" + ask.dump(), models_.size());
  if (fresh) models_.push_back(std::move(ask));
  model_of_ticket_.push_back(at->second);
  return model_of_ticket_.size() - 1;
}

namespace {

// The engine's verdicts on sections this process asked before: a form that
// checks every edit asks the worker once per section it has not seen.
struct AnsweredSections {
  std::mutex mutex;
  std::map<std::string, nlohmann::json> by_request;
};
AnsweredSections& answered_sections() {
  static AnsweredSections answered;
  return answered;
}

}  // namespace

std::optional<EngineCheck::Refusal> EngineCheck::ask() {
  size_problems_.assign(model_of_ticket_.size(), std::nullopt);
  auto& answered = answered_sections();
  std::vector<nlohmann::json> known(sections_.size());
  nlohmann::json unasked = nlohmann::json::array();
  std::vector<std::size_t> unasked_at;
  {
    std::lock_guard<std::mutex> lock(answered.mutex);
    for (std::size_t i = 0; i < sections_.size(); ++i) {
      const auto at = answered.by_request.find(sections_[i].dump());
      if (at != answered.by_request.end()) {
        known[i] = at->second;
      } else {
        unasked.push_back(sections_[i]);
        unasked_at.push_back(i);
      }
    }
  }
  if (unasked.empty() && models_.empty()) {
    for (std::size_t i = 0; i < known.size(); ++i)
      if (known[i].is_object())
        return Refusal{ConfigError(known[i].value("field", std::string()), known[i].value("problem", std::string())),
                       labels_[i]};
    return std::nullopt;
  }
  const nlohmann::json request = {{kEngineCheckSections, unasked}, {kEngineCheckModels, models_}};
  const auto& here = components().check_here;
  const auto answer = here ? here(request) : call_worker("--check", "check the configuration", request);
  if (!answer.is_object()) throw std::runtime_error("the engine answered its check with something other than an object");
  const auto fresh = answer.value(kEngineCheckSections, nlohmann::json::array());
  const auto models = answer.value(kEngineCheckModels, nlohmann::json::array());
  if (fresh.size() != unasked.size() || models.size() != models_.size())
    throw std::runtime_error("the engine's check answered " + std::to_string(fresh.size()) + " sections and " +
                             std::to_string(models.size()) + " models of " + std::to_string(unasked.size()) + " and " +
                             std::to_string(models_.size()));
  auto sections = std::move(known);
  {
    std::lock_guard<std::mutex> lock(answered.mutex);
    for (std::size_t k = 0; k < unasked_at.size(); ++k) {
      sections[unasked_at[k]] = fresh[k];
      answered.by_request[unasked[k].dump()] = fresh[k];
    }
  }
  const auto error = [](const nlohmann::json& j) -> std::optional<ConfigError> {
    if (!j.is_object()) return std::nullopt;
    return ConfigError(j.value("field", std::string()), j.value("problem", std::string()));
  };
  for (std::size_t t = 0; t < model_of_ticket_.size(); ++t) size_problems_[t] = error(models[model_of_ticket_[t]]);
  for (std::size_t i = 0; i < sections.size(); ++i)
    if (auto refusal = error(sections[i])) return Refusal{*refusal, labels_[i]};
  return std::nullopt;
}

void check_in_the_engine(const RunConfig& config) {
  EngineCheck check;
  check.add_config(config);
  if (auto refusal = check.ask()) throw refusal->error;
}

}  // namespace commtune

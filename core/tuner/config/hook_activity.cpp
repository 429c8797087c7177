#include "core/tuner/config/hook_activity.h"

#include "core/tuner/config/components.h"

namespace commtune {

namespace {

const nlohmann::json& hook_section(const nlohmann::json& run_config) {
  static const nlohmann::json empty = nlohmann::json::object();
  return run_config.is_object() && run_config.contains("hook") && run_config["hook"].is_object() ? run_config["hook"]
                                                                                                 : empty;
}

std::string hook_name(const nlohmann::json& hook) { return hook.value("name", std::string("allreduce")); }

bool wrapped(const nlohmann::json& hook) { return hook.value("wrapper", std::string("none")) != "none"; }

// The hook's start step as its declaration reads it (its default when the configuration leaves it out).
std::int64_t start_step(const nlohmann::json& hook, const std::string& name, const std::string& key) {
  const auto* spec = components().hooks.entry(name).params.find(key);
  if (!spec) throw std::logic_error("hook " + name + " declares no " + key);
  const auto at = hook.find(key);
  return check_param(*spec, at == hook.end() ? spec->default_value : *at, "hook." + key).get<std::int64_t>();
}

}  // namespace

HookActivity hook_activity(const nlohmann::json& run_config) {
  const auto& hook = hook_section(run_config);
  if (wrapped(hook)) return {};  // the fp16/bf16 wrapper halves every bucket from the first step
  const auto name = hook_name(hook);
  if (name == "powersgd" || name == "batched_powersgd")
    return {start_step(hook, name, "start_powerSGD_iter"), "hook.start_powerSGD_iter"};
  if (name == "post_local_sgd")
    return {start_step(hook, name, "start_localSGD_iter"), "hook.start_localSGD_iter"};
  return {};
}

std::string hook_inactivity_warning(const nlohmann::json& run_config) {
  const auto activity = hook_activity(run_config);
  const auto steps = run_config.is_object() ? run_config.value("steps", std::int64_t{0}) : 0;
  if (activity.start_field.empty() || activity.first_active_step < steps) return "";
  return activity.start_field + " is " + std::to_string(activity.first_active_step) + ", not below steps (" +
         std::to_string(steps) + "): this run's hook never acts, it trains as plain allreduce";
}

}  // namespace commtune

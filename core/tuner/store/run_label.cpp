#include "core/tuner/store/run_label.h"

namespace commtune {

bool is_plain_allreduce(const nlohmann::json& config) {
  if (!config.is_object()) return false;
  const auto hook = config.find("hook");  // found, not copied: asked of every run of a sweep of 10^5
  if (hook == config.end()) return true;
  if (!hook->is_object()) return false;
  const auto name = hook->find("name"), wrapper = hook->find("wrapper");
  return (name == hook->end() || *name == "allreduce" || *name == "none") &&
         (wrapper == hook->end() || *wrapper == "none");
}

std::string describe_hook(const nlohmann::json& config) {
  static const nlohmann::json none = nlohmann::json::object();
  const auto found = config.is_object() ? config.find("hook") : config.end();
  const auto& hook = found != config.end() && found->is_object() ? *found : none;
  const auto text_of = [&](const char* key, const char* fallback) -> std::string {
    const auto v = hook.find(key);
    if (v == hook.end()) return fallback;
    return v->is_string() ? v->get<std::string>() : v->dump();
  };
  std::string text = text_of("name", "allreduce");
  const auto wrapper = text_of("wrapper", "none");
  if (wrapper != "none") text += " (" + wrapper + " wrapper)";
  return text;
}

std::string describe_hook(const db::RunRecord& run) {
  return run.config_problem.empty() ? describe_hook(run.config) : "(unreadable configuration)";
}

std::string run_label(const db::RunRecord& run) { return run.name.empty() ? describe_hook(run) : run.name; }

const db::RunRecord* find_allreduce_baseline(const std::vector<db::RunRecord>& runs) {
  const db::RunRecord* best = nullptr;
  for (const auto& run : runs)
    if (run.status == db::status::kSucceeded && is_plain_allreduce(run.config) &&
        (!best || run.steps_completed > best->steps_completed))
      best = &run;
  return best;
}

}  // namespace commtune

#include "core/netmodel/recommend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/store/run_metrics.h"

namespace commtune {

namespace {

bool is_plain_allreduce(const nlohmann::json& config) {
  const auto hook = config.value("hook", nlohmann::json::object());
  const auto name = hook.value("name", "allreduce");
  return (name == "allreduce" || name == "none") && hook.value("wrapper", "none") == "none";
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.2f%%", 100 * fraction);
  return text;
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", 1e3 * seconds);
  return text;
}

nlohmann::json optional_number(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string describe_hook(const nlohmann::json& config) {
  const auto hook = config.value("hook", nlohmann::json::object());
  std::string text = hook.value("name", "allreduce");
  const auto wrapper = hook.value("wrapper", "none");
  if (wrapper != "none") text += " (" + wrapper + " wrapper)";
  return text;
}

std::optional<std::int64_t> find_allreduce_baseline(const db::Store& store, const std::vector<std::int64_t>& run_ids) {
  std::optional<std::int64_t> best;
  std::int64_t best_steps = -1;
  for (const auto id : run_ids) {
    const auto run = store.run(id);
    if (!run || run->status != db::status::kSucceeded || !is_plain_allreduce(run->config)) continue;
    if (run->steps_completed > best_steps) {
      best = id;
      best_steps = run->steps_completed;
    }
  }
  return best;
}

Recommendation recommend(const db::Store& store, const std::vector<std::int64_t>& run_ids,
                         const RecommendOptions& options) {
  Recommendation r;
  r.cluster = options.cluster;
  r.tolerance = options.tolerance;
  r.compute = options.compute.describe();
  const auto predict_on_target = [&](std::int64_t id) {
    return predict(on_target(RunProfile::from_store(store, id), options.compute), options.cluster);
  };
  const auto baseline_id = options.baseline_run ? options.baseline_run : find_allreduce_baseline(store, run_ids);
  if (!baseline_id)
    throw db::Error(
        "no finished allreduce run among these runs to compare with: run one (a sweep with \"baseline\": true adds "
        "it) or name one with --baseline");
  const auto baseline = store.run(*baseline_id);
  if (!baseline) throw db::Error("there is no run " + std::to_string(*baseline_id));
  r.baseline_run = *baseline_id;
  const auto baseline_loss = tail_loss(store.curve(*baseline_id));
  const auto baseline_step = predict_on_target(*baseline_id).step_s;

  auto ids = run_ids;
  if (std::find(ids.begin(), ids.end(), *baseline_id) == ids.end()) ids.insert(ids.begin(), *baseline_id);
  for (const auto id : ids) {
    const auto run = store.run(id);
    if (!run) continue;
    Candidate c;
    c.run_id = id;
    c.hook = describe_hook(run->config);
    c.label = run->name.empty() ? c.hook : run->name;
    if (run->status != db::status::kSucceeded)
      c.excluded = "it " + (run->status == db::status::kStopped ? std::string("was stopped early") : run->status);
    else if (run->fingerprint != baseline->fingerprint)
      c.excluded = "it trained another model or data than the baseline";
    else if (run->steps_completed != baseline->steps_completed)
      c.excluded = "it ran " + std::to_string(run->steps_completed) + " steps, the baseline " +
                   std::to_string(baseline->steps_completed);
    c.loss = tail_loss(store.curve(id));
    if (c.loss && baseline_loss && *baseline_loss != 0) {
      c.loss_change = (*c.loss - *baseline_loss) / std::fabs(*baseline_loss);
      c.within_tolerance =
          std::isfinite(*c.loss) && *c.loss <= *baseline_loss + options.tolerance * std::fabs(*baseline_loss);
    }
    try {
      c.prediction = predict_on_target(id);
      c.speedup = baseline_step / c.prediction->step_s;
    } catch (const db::Error& e) {
      if (c.excluded.empty()) c.excluded = e.what();
    }
    if (c.excluded.empty() && !c.within_tolerance)
      c.excluded = "its loss is " + percent(c.loss_change.value_or(NAN)) + " from the baseline's, beyond " +
                   percent(options.tolerance).substr(1);
    r.candidates.push_back(std::move(c));
  }
  std::stable_sort(r.candidates.begin(), r.candidates.end(), [](const Candidate& a, const Candidate& b) {
    const double ta = a.prediction ? a.prediction->step_s : INFINITY,
                 tb = b.prediction ? b.prediction->step_s : INFINITY;
    return ta < tb;
  });

  const Candidate* best = nullptr;
  for (const auto& c : r.candidates)
    if (c.excluded.empty() && c.run_id != r.baseline_run && c.speedup && (!best || *c.speedup > *best->speedup))
      best = &c;
  const auto where = options.cluster.describe() + " (" + r.compute + ")";
  if (best && *best->speedup >= options.min_speedup) {
    r.chosen_run = best->run_id;
    char text[1024];
    std::snprintf(text, sizeof text,
                  "use %s (run %lld): predicted %s per step against %s for allreduce on %s (%.2fx), loss %s from "
                  "allreduce's",
                  best->label.c_str(), static_cast<long long>(best->run_id),
                  milliseconds(best->prediction->step_s).c_str(), milliseconds(baseline_step).c_str(), where.c_str(),
                  *best->speedup, percent(best->loss_change.value_or(0)).c_str());
    r.verdict = text;
  } else {
    r.verdict = "keep allreduce: ";
    if (best) {
      char text[1024];
      std::snprintf(text, sizeof text,
                    "the best configuration within %s of its loss, %s, is predicted only %.2fx as fast on %s",
                    percent(options.tolerance).substr(1).c_str(), best->label.c_str(), *best->speedup, where.c_str());
      r.verdict += text;
    } else {
      r.verdict += "no other configuration keeps the loss within " + percent(options.tolerance).substr(1) +
                   " of allreduce's and can be predicted on " + where;
    }
  }
  return r;
}

nlohmann::json Recommendation::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : candidates) {
    nlohmann::json j{{"run_id", c.run_id},
                     {"label", c.label},
                     {"hook", c.hook},
                     {"loss", optional_number(c.loss)},
                     {"loss_change", optional_number(c.loss_change)},
                     {"within_tolerance", c.within_tolerance},
                     {"speedup", optional_number(c.speedup)}};
    if (c.prediction) j["prediction"] = c.prediction->to_json();
    if (!c.excluded.empty()) j["excluded"] = c.excluded;
    list.push_back(std::move(j));
  }
  return {{"cluster", cluster.describe()},
          {"compute", compute},
          {"tolerance", tolerance},
          {"baseline_run", baseline_run},
          {"chosen_run", chosen_run ? nlohmann::json(*chosen_run) : nlohmann::json(nullptr)},
          {"keep_allreduce", !chosen_run.has_value()},
          {"verdict", verdict},
          {"candidates", list}};
}

}  // namespace commtune

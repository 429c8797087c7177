#include "core/tuner/verdict/recommend.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>

#include "core/tuner/store/run_label.h"
#include "core/tuner/store/run_metrics.h"

namespace commtune {

namespace {

std::string format_text(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format_text(const char* pattern, ...) {
  char text[1024];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(text, sizeof text, pattern, args);
  va_end(args);
  return text;
}

std::string tolerance_percent(double fraction) { return format_text("%.2f%%", 100 * fraction); }

nlohmann::json optional_number(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// "" when every run of the configuration has its tail loss in the store, else
// which one has none: a missing value is missing, never 0.
std::string missing_loss(const Configuration& config) {
  for (std::size_t i = 0; i < config.runs.size(); ++i)
    if (!config.tail_losses[i])
      return "run " + std::to_string(config.runs[i]) +
             " has no loss for its last steps in the store (NULL or not a number)";
  return "";
}

std::string run_list(const std::vector<std::int64_t>& runs) {
  std::string out;
  for (const auto id : runs) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

}  // namespace

std::string digits_beside(double value, std::initializer_list<double> marks) {
  if (!std::isfinite(value)) return format_text("%g", value);
  const auto side = [](double a, double b) { return (a > b) - (a < b); };
  for (int digits = 2;; ++digits) {
    const auto text = format_text("%.*f", digits, value);
    const double shown = std::strtod(text.c_str(), nullptr);
    if (digits == 6 || std::all_of(marks.begin(), marks.end(), [&](double m) { return side(shown, m) == side(value, m); }))
      return text;
  }
}

std::string speedup_text(const Estimate& s, double margin) {
  const auto text = digits_beside(s.value, {1.0, margin}) + "x";
  if (!s.has_interval()) return text;
  return text + " (95%: " + digits_beside(s.low, {1.0}) + "-" + digits_beside(s.high, {1.0}) + ")";
}

std::string candidate_reason(const Candidate& k, const Candidate* best, const std::optional<std::int64_t>& chosen,
                             const RecommendOptions& options) {
  if (k.is_baseline) return "the baseline";
  if (!k.excluded.empty()) return "excluded: " + k.excluded;
  if (chosen && *chosen == k.run_id) return "chosen";
  const auto& s = k.speedup;
  if (!std::isfinite(s.value)) return "no prediction on this network";
  const auto text = speedup_text(s, options.min_speedup);
  if (!s.has_interval())
    return "predicted " + text +
           (best == &k ? std::string(" with no interval (too few steps or runs to resample)")
                       : " with no interval drawn (only the " + std::to_string(options.intervals) +
                             " fastest predicted and the one judged have one)");
  if (s.high < 1.0) return "slower than allreduce: " + text + ", an interval wholly below 1.0";
  if (s.low <= 1.0) return "no measurable difference from allreduce: " + text + ", an interval that holds 1.0";
  if (s.value < options.min_speedup)
    return "predicted only " + text + ", below the model's margin of " + digits_beside(options.min_speedup, {}) + "x";
  return "run " + std::to_string(best ? best->run_id : 0) + " is predicted faster (" +
         (best ? speedup_text(best->speedup, options.min_speedup) : std::string("-")) + ")";
}

Recommendation recommend(const db::Store& store, std::vector<db::RunRecord> runs, const RecommendOptions& options) {
  const auto named = options.baseline_run;
  if (named && std::none_of(runs.begin(), runs.end(), [&](const db::RunRecord& r) { return r.id == *named; })) {
    auto baseline = store.run(*named);
    if (!baseline) throw db::Error("there is no run " + std::to_string(*named));
    runs.insert(runs.begin(), std::move(*baseline));
  }
  const auto evidence = Evidence::gather(store, std::move(runs));
  std::vector<db::RunRecord>().swap(runs);  // what the evidence took nothing from, freed before the verdicts
  return recommend(evidence, options);
}

bool is_recommended(const Candidate& best, const RecommendOptions& options) {
  return best.speedup.has_interval() && best.speedup.low > 1.0 && best.speedup.value >= options.min_speedup;
}

std::string recommendation_verdict(const Candidate* best, const std::string& where, const RecommendOptions& options) {
  const auto tolerance = tolerance_percent(options.tolerance);
  if (!best)
    return "keep allreduce: no other configuration keeps the loss within " + tolerance +
           " of allreduce's, compressed during its measured steps, and can be predicted on " + where;
  const auto& s = best->speedup;
  if (is_recommended(*best, options))
    return format_text(
        "use %s (run %lld): predicted %.2f ms per step against %.2f ms for allreduce at the same settings on %s, "
        "%s; loss %s from allreduce's",
        best->label.c_str(), static_cast<long long>(best->run_id), 1e3 * best->step_s.value,
        1e3 * best->step_s.value * s.value, where.c_str(), speedup_text(s, options.min_speedup).c_str(), best->loss_change.describe().c_str());
  // Otherwise the reason is read off the interval the verdict prints: wholly
  // below 1.0 is slower, not "no difference".
  if (!s.has_interval())
    return format_text(
        "keep allreduce: no difference can be shown on %s; the best configuration within %s of its loss, %s, is "
        "predicted %s with no interval (too few steps or runs to resample)",
        where.c_str(), tolerance.c_str(), best->label.c_str(), speedup_text(s, options.min_speedup).c_str());
  if (s.high < 1.0)
    return format_text(
        "keep allreduce: it is measurably faster on %s; the best configuration within %s of its loss, %s, is "
        "%s, an interval wholly below 1.0",
        where.c_str(), tolerance.c_str(), best->label.c_str(), speedup_text(s, options.min_speedup).c_str());
  if (s.low <= 1.0)
    return format_text(
        "keep allreduce: no measurable difference on %s; the best configuration within %s of its loss, %s, is "
        "%s, an interval that holds 1.0",
        where.c_str(), tolerance.c_str(), best->label.c_str(), speedup_text(s, options.min_speedup).c_str());
  return format_text(
      "keep allreduce: the best configuration within %s of its loss, %s, is predicted only %s on %s, below the "
      "model's margin of %sx",
      tolerance.c_str(), best->label.c_str(), speedup_text(s, options.min_speedup).c_str(), where.c_str(),
      digits_beside(options.min_speedup, {}).c_str());
}

JudgedCandidates judge_candidates(const Evidence& evidence, const RecommendOptions& options) {
  JudgedCandidates judged;
  judged.tolerance = options.tolerance;
  judged.baseline_run = options.baseline_run;
  const auto& configs = evidence.configurations();
  auto& forced = judged.forced;
  if (options.baseline_run) {
    forced = evidence.configuration_of(*options.baseline_run);
    if (!forced) throw db::Error("there is no run " + std::to_string(*options.baseline_run) + " among these runs");
  }
  bool any_baseline = forced.has_value();
  for (std::size_t c = 0; c < configs.size() && !any_baseline; ++c) any_baseline = configs[c].plain_allreduce;
  if (!any_baseline)
    throw db::Error(
        "no finished allreduce run among these runs to compare with: run one (a sweep with \"baseline\": true adds "
        "one at every value of the parameters it sweeps outside the hook) or name one with --baseline");

  judged.candidates.reserve(configs.size());
  for (std::size_t c = 0; c < configs.size(); ++c) {
    const auto& config = configs[c];
    Candidate k;
    k.run_id = config.runs.front();
    k.runs = config.runs;
    k.seeds = config.seed_count();
    k.label = config.label;
    k.hook = config.hook;
    k.is_baseline = config.plain_allreduce && !forced;
    if (forced && *forced == c) k.is_baseline = true;
    const double mean = config.mean_loss();
    if (!std::isnan(mean)) k.loss = mean;
    if (const double sd = config.loss_sd(); !std::isnan(sd)) k.loss_sd = sd;
    if (!config.all_succeeded()) {
      for (std::size_t i = 0; i < config.runs.size() && k.excluded.empty(); ++i)
        if (config.statuses[i] != db::status::kSucceeded)
          k.excluded = "run " + std::to_string(config.runs[i]) + " " +
                       (config.statuses[i] == db::status::kStopped ? std::string("was stopped early")
                                                                    : config.statuses[i]);
    }
    if (k.excluded.empty()) k.excluded = missing_loss(config);
    const auto baseline = forced ? forced : evidence.baseline_of(c);
    if (baseline) {
      const auto& base = configs[*baseline];
      k.baseline_run = base.runs.front();
      k.loss_change = evidence.loss_change(c, *baseline);
      k.within_tolerance = k.loss_change.judge(options.tolerance) == LossChange::Judgement::Within;
      if (k.excluded.empty() && base.fingerprint_family != config.fingerprint_family)
        k.excluded = "it trained another model or data than its baseline (run " + std::to_string(base.runs.front()) +
                     ")";
      if (k.excluded.empty() && !k.is_baseline) {
        const auto differences = evidence.differences_outside_hook(c, *baseline);
        if (!differences.empty())
          k.excluded = "its baseline (run " + std::to_string(base.runs.front()) + ") differs outside the hook (" +
                       differences + "): a difference in loss or time could come from that";
      }
      if (k.excluded.empty() && !base.all_succeeded())
        k.excluded = "its baseline (runs " + run_list(base.runs) + ") did not succeed";
      if (const auto missing = missing_loss(base); k.excluded.empty() && !k.is_baseline && !missing.empty())
        k.excluded = "its baseline's " + missing;
    } else if (k.excluded.empty()) {
      // A hook that never acted is the reason to name first: a baseline would not change that.
      k.excluded = evidence.inactive_reason(c, std::nullopt);
      if (k.excluded.empty()) k.excluded = evidence.baseline_problem(c);
    }
    if (evidence.profile_problem(c).empty()) {
      if (judged.compute_source.empty()) judged.compute_source = evidence.compute_source(c);
    } else if (k.excluded.empty()) {
      k.excluded = evidence.profile_problem(c);
    }
    if (k.excluded.empty() && !k.is_baseline && baseline) k.excluded = evidence.inactive_reason(c, *baseline);
    if (k.excluded.empty() && !k.is_baseline) {
      switch (k.loss_change.judge(options.tolerance)) {
        case LossChange::Judgement::Beyond:
          k.excluded = "its loss is " + k.loss_change.describe() + " from its baseline's, beyond " +
                       tolerance_percent(options.tolerance);
          break;
        case LossChange::Judgement::Uncertain:
          k.excluded = "its loss is " + k.loss_change.describe() + " from its baseline's: the seeds cannot tell "
                       "whether it is within " + tolerance_percent(options.tolerance);
          break;
        case LossChange::Judgement::Within:
          break;
      }
    }
    judged.candidates.push_back(std::move(k));
  }
  return judged;
}

Recommendation recommend(const Evidence& evidence, const JudgedCandidates& judged, const RecommendOptions& options) {
  if (options.tolerance != judged.tolerance || options.baseline_run != judged.baseline_run ||
      judged.candidates.size() != evidence.configurations().size())
    throw std::invalid_argument(
        "recommend: the candidates were judged with another tolerance or baseline, or from other evidence");
  Recommendation r;
  r.cluster = options.cluster;
  r.tolerance = options.tolerance;
  r.intervals = options.intervals;
  r.run_to_run = evidence.run_to_run();
  const auto& forced = judged.forced;

  // Each configuration's point prediction, made once: a baseline serves
  // every configuration at its settings (intervals come from Evidence).
  const auto& configs = evidence.configurations();
  std::vector<std::optional<StepPrediction>> predictions(configs.size());
  const auto predicted = [&](std::size_t c) -> const StepPrediction& {
    if (!predictions[c]) predictions[c] = predict(on_target(evidence.profile(c), options.compute), options.cluster);
    return *predictions[c];
  };
  r.candidates = judged.candidates;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    if (!evidence.profile_problem(c).empty()) continue;
    auto& k = r.candidates[c];
    k.prediction = predicted(c);
    k.step_s.value = k.prediction->step_s;  // Evidence::predicted_step_s's point
    const auto baseline = forced ? forced : evidence.baseline_of(c);
    if (baseline && evidence.profile_problem(*baseline).empty())
      k.speedup.value = predicted(*baseline).step_s / k.step_s.value;  // Evidence::speedup's point
  }
  r.compute = options.compute.kind == TargetCompute::Kind::Measured
                  ? "compute: this machine's, " +
                        (judged.compute_source.empty() ? std::string("as measured") : judged.compute_source)
                  : options.compute.describe();
  std::stable_sort(r.candidates.begin(), r.candidates.end(), [](const Candidate& a, const Candidate& b) {
    const double ta = std::isnan(a.step_s.value) ? INFINITY : a.step_s.value;
    const double tb = std::isnan(b.step_s.value) ? INFINITY : b.step_s.value;
    return ta < tb;
  });

  Candidate* best = nullptr;
  for (auto& c : r.candidates)
    if (c.excluded.empty() && !c.is_baseline && std::isfinite(c.speedup.value) &&
        (!best || c.speedup.value > best->speedup.value))
      best = &c;
  // Intervals: the fastest predicted candidates' and the one the verdict judges.
  const auto draw_intervals = [&](Candidate& k) {
    const auto c = *evidence.configuration_of(k.run_id);
    if (!evidence.profile_problem(c).empty()) return;
    k.step_s = evidence.predicted_step_s(c, options.cluster, options.compute);
    const auto baseline = forced ? forced : evidence.baseline_of(c);
    if (baseline && evidence.profile_problem(*baseline).empty())
      k.speedup = evidence.speedup(c, *baseline, options.cluster, options.compute);
  };
  for (std::size_t i = 0; i < std::min(options.intervals, r.candidates.size()); ++i) draw_intervals(r.candidates[i]);
  if (best && best - r.candidates.data() >= static_cast<std::ptrdiff_t>(options.intervals)) draw_intervals(*best);
  for (const auto& c : r.candidates)
    if (c.is_baseline && !r.baseline_run) r.baseline_run = c.run_id;
  if (best && best->baseline_run) r.baseline_run = *best->baseline_run;
  const auto where = options.cluster.describe() + " (" + r.compute + ")";
  if (best && is_recommended(*best, options)) r.chosen_run = best->run_id;
  r.verdict = recommendation_verdict(best, where, options);
  std::size_t reasoned = 0;
  for (auto& k : r.candidates)
    if (k.is_baseline || reasoned++ < options.reasons) k.reason = candidate_reason(k, best, r.chosen_run, options);
  return r;
}

Recommendation recommend(const Evidence& evidence, const RecommendOptions& options) {
  return recommend(evidence, judge_candidates(evidence, options), options);
}

nlohmann::json Candidate::to_json() const {
  nlohmann::json j{{"run_id", run_id},
                   {"runs", runs},
                   {"seeds", seeds},
                   {"label", label},
                   {"hook", hook},
                   {"baseline", is_baseline},
                   {"baseline_run", baseline_run ? nlohmann::json(*baseline_run) : nlohmann::json(nullptr)},
                   {"loss", optional_number(loss)},
                   {"loss_sd", optional_number(loss_sd)},
                   {"loss_change", optional_number(loss_change.change.value)},
                   {"loss_change_interval", loss_change.change.to_json()},
                   {"within_tolerance", within_tolerance},
                   {"speedup", optional_number(speedup.value)},
                   {"speedup_interval", speedup.to_json()},
                   {"step_s", step_s.to_json()}};
  if (prediction) j["prediction"] = prediction->to_json();
  if (!excluded.empty()) j["excluded"] = excluded;
  if (!reason.empty()) j["reason"] = reason;
  return j;
}

nlohmann::json Recommendation::to_json() const {
  auto j = summary_json();
  auto& list = j["candidates"] = nlohmann::json::array();
  for (const auto& c : candidates) list.push_back(c.to_json());
  return j;
}

nlohmann::json Recommendation::summary_json() const {
  return {{"cluster", cluster.describe()},
          {"compute", compute},
          {"run_to_run", run_to_run.to_json()},
          {"tolerance", tolerance},
          {"intervals", intervals},
          {"baseline_run", baseline_run},
          {"chosen_run", chosen_run ? nlohmann::json(*chosen_run) : nlohmann::json(nullptr)},
          {"keep_allreduce", !chosen_run.has_value()},
          {"verdict", verdict}};
}

}  // namespace commtune

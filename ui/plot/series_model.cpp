#include "ui/plot/series_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

namespace commtune::ui {

double Ema::add(double value) {
  if (weight_ <= 0 || !std::isfinite(value)) return value;
  ema_ = ema_ * weight_ + (1 - weight_) * value;
  ++count_;
  return ema_ / (1 - std::pow(weight_, count_));
}

SeriesModel::Run* SeriesModel::find(std::int64_t run_id) {
  for (auto& r : runs_)
    if (r.id == run_id) return &r;
  return nullptr;
}

const SeriesModel::Run* SeriesModel::find(std::int64_t run_id) const {
  for (const auto& r : runs_)
    if (r.id == run_id) return &r;
  return nullptr;
}

bool SeriesModel::add_run(std::int64_t run_id, std::string label,
                          std::vector<std::pair<std::string, std::string>> values) {
  if (has_run(run_id)) return false;
  Run run;
  run.id = run_id;
  run.label = std::move(label);
  if (values.empty())  // "12 rank=4 lr=0.1": its parameter=value words
    for (std::size_t at = 0; at < run.label.size();) {
      const auto end = std::min(run.label.find(' ', at), run.label.size());
      const auto word = run.label.substr(at, end - at);
      if (const auto eq = word.find('='); eq != std::string::npos && eq > 0)
        values.emplace_back(word.substr(0, eq), word.substr(eq + 1));
      at = end + 1;
    }
  run.values = std::move(values);
  run.ema.fill(Ema(smoothing_));
  runs_.push_back(std::move(run));
  return true;
}

bool SeriesModel::has_run(std::int64_t run_id) const { return find(run_id) != nullptr; }

void SeriesModel::clear() { runs_.clear(); }

std::optional<SeriesModel::Appended> SeriesModel::append(const LivePoint& p) {
  auto* r = find(p.run_id);
  if (!r) return std::nullopt;
  if (!r->points.empty() && p.step <= r->points.back().step) return std::nullopt;
  // A resumed launch (a promoted trial's next segment) counts its time from 0 again: go on from the last point.
  const double last_wall = r->points.empty() ? 0.0 : r->points.back().wall_s;
  if (!r->points.empty() && p.wall_s + r->wall_offset < last_wall) r->wall_offset = last_wall - p.wall_s;
  r->points.push_back(p);
  r->points.back().wall_s = p.wall_s + r->wall_offset;
  Appended out{r->points.back(), {}};
  for (std::size_t m = 0; m < kMetrics; ++m) {
    const auto metric = static_cast<LiveMetric>(m);
    // The compression ratio and the bytes are step functions: smoothing would only bend their steps.
    const bool smoothed = metric != LiveMetric::Ratio && metric != LiveMetric::WireMb;
    const double value = live_metric(p, metric);
    out.drawn[m] = smoothed ? r->ema[m].add(value) : value;
  }
  return out;
}

bool SeriesModel::truncate(std::int64_t run_id, std::int64_t step) {
  auto* run = find(run_id);
  if (!run || run->points.empty() || run->points.back().step < step) return false;
  run->points.erase(std::lower_bound(run->points.begin(), run->points.end(), step,
                                     [](const LivePoint& p, std::int64_t s) { return p.step < s; }),
                    run->points.end());
  return true;
}

bool SeriesModel::merge(std::int64_t run_id, const std::vector<LivePoint>& points) {
  auto* run = find(run_id);
  if (!run || points.empty()) return false;
  auto by_step = [](const LivePoint& a, const LivePoint& b) { return a.step < b.step; };
  std::vector<LivePoint> all = run->points;  // first: a step shown already keeps its point
  all.insert(all.end(), points.begin(), points.end());
  std::stable_sort(all.begin(), all.end(), by_step);
  all.erase(
      std::unique(all.begin(), all.end(), [](const LivePoint& a, const LivePoint& b) { return a.step == b.step; }),
      all.end());
  run->points = std::move(all);
  return true;
}

std::vector<LivePoint> SeriesModel::take_points(std::int64_t run_id) {
  auto* run = find(run_id);
  if (!run) return {};
  run->wall_offset = 0;  // the points taken carry it already
  run->ema.fill(Ema(smoothing_));
  auto out = std::move(run->points);
  run->points.clear();
  return out;
}

const std::vector<LivePoint>& SeriesModel::points(std::int64_t run_id) const {
  static const std::vector<LivePoint> none;
  const auto* run = find(run_id);
  return run ? run->points : none;
}

std::vector<SeedGroup> SeriesModel::seed_groups() const {
  // The label without its id and its seed=N word: runs that share it are replicas.
  std::map<std::string, std::vector<std::int64_t>> by_key;
  for (const auto& r : runs_) {
    std::vector<std::string> words;
    for (std::size_t at = 0; at < r.label.size();) {
      const auto end = std::min(r.label.find(' ', at), r.label.size());
      if (end > at) words.push_back(r.label.substr(at, end - at));
      at = end + 1;
    }
    const auto seed =
        std::find_if(words.begin(), words.end(), [](const std::string& w) { return w.rfind("seed=", 0) == 0; });
    if (seed == words.end()) continue;
    words.erase(seed);
    words.erase(std::remove(words.begin(), words.end(), std::to_string(r.id)), words.end());
    std::string key;
    for (const auto& word : words) key += (key.empty() ? "" : " ") + word;
    by_key[key].push_back(r.id);
  }
  std::vector<SeedGroup> out;
  for (auto& [key, ids] : by_key)
    if (ids.size() >= 2) out.push_back({key, std::move(ids)});
  return out;
}

std::vector<std::string> SeriesModel::group_parameters() const {
  std::vector<std::string> named;
  std::map<std::string, std::map<std::string, int>> counts;  // param -> value -> runs
  for (const auto& r : runs_)
    for (const auto& [param, value] : r.values) {
      if (std::find(named.begin(), named.end(), param) == named.end()) named.push_back(param);
      ++counts[param][value];
    }
  std::vector<std::string> out;
  for (const auto& param : named) {
    const auto& values = counts[param];
    const bool shared = std::any_of(values.begin(), values.end(), [](const auto& v) { return v.second >= 2; });
    if (values.size() >= 2 && shared) out.push_back(param);
  }
  return out;
}

std::vector<SeedGroup> SeriesModel::groups_by(const std::string& param) const {
  if (param.empty()) return seed_groups();
  std::vector<SeedGroup> all;
  for (const auto& r : runs_)
    for (const auto& [name, value] : r.values) {
      if (name != param) continue;
      const auto key = name + "=" + value;
      auto it = std::find_if(all.begin(), all.end(), [&](const SeedGroup& g) { return g.key == key; });
      if (it == all.end()) it = all.insert(all.end(), SeedGroup{key, {}, "runs"});
      it->runs.push_back(r.id);
      break;
    }
  std::vector<SeedGroup> out;
  for (auto& g : all)
    if (g.runs.size() >= 2) out.push_back(std::move(g));
  return out;
}

std::string group_label(const SeedGroup& group) {
  const std::string count = std::to_string(group.runs.size()) + " " + group.unit;
  return group.key.empty() ? count : group.key + " (" + count + ")";
}

GroupSeries::Update GroupSeries::advance(const SeriesModel& model, bool by_wall) {
  std::vector<const std::vector<LivePoint>*> members;
  for (const auto id : group_.runs)
    if (model.has_run(id)) members.push_back(&model.points(id));
  std::size_t steps = members.empty() ? 0 : SIZE_MAX;
  for (const auto* points : members) steps = std::min(steps, points->size());
  Update out;
  if (restart_ || by_wall_ != by_wall || smoothing_ != model.smoothing() || steps < steps_) {
    out.restarted = true;
    restart_ = false;
    by_wall_ = by_wall;
    smoothing_ = model.smoothing();
    steps_ = 0;
    mean_ = sd_ = Ema(smoothing_);
  }
  for (std::size_t i = steps_; i < steps; ++i) {
    double sum = 0, sum_sq = 0, wall = 0;
    for (const auto* points : members) {
      const auto& p = (*points)[i];
      sum += p.loss;
      sum_sq += p.loss * p.loss;
      wall += p.wall_s;
    }
    const double n = static_cast<double>(members.size());
    const double mean = sum / n;
    const double sd = std::sqrt(std::max(0.0, (sum_sq - n * mean * mean) / (n - 1)));
    const double m = mean_.add(mean);
    const double d = sd_.add(sd);
    out.points.push_back({by_wall ? wall / n : static_cast<double>((*members.front())[i].step), m, d});
  }
  steps_ = steps;
  return out;
}

}  // namespace commtune::ui

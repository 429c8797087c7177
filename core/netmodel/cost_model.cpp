#include "core/netmodel/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "core/store/run_metrics.h"

namespace commtune {

namespace {

// A statistic's per-step values (averaged over ranks) over the steady steps,
// reduced to their median, per bucket.
std::map<std::int32_t, double> steady_median(const std::vector<db::StatPoint>& points, std::int64_t first_step) {
  std::map<std::pair<std::int32_t, std::int64_t>, std::pair<double, int>> per_step;
  for (const auto& p : points) {
    if (p.step < first_step) continue;
    auto& [sum, n] = per_step[{p.bucket, p.step}];
    sum += p.value;
    ++n;
  }
  std::map<std::int32_t, std::vector<double>> series;
  for (const auto& [key, acc] : per_step) series[key.first].push_back(acc.first / acc.second);
  std::map<std::int32_t, double> out;
  for (auto& [bucket, values] : series) out[bucket] = median(std::move(values));
  return out;
}

// A whole-step statistic's mean per steady step, steps without a value
// counting as zero: collectives that run every few steps (parameter
// averaging) are amortised over the steps between them.
double steady_mean(const std::vector<db::StatPoint>& points, std::int64_t first_step, std::int64_t steps,
                   int world_size) {
  double sum = 0;
  for (const auto& p : points)
    if (p.step >= first_step && p.bucket == db::kWholeStep) sum += p.value;
  return steps > 0 && world_size > 0 ? sum / static_cast<double>(steps * world_size) : 0;
}

struct StepTimes {
  double data = 0, forward = 0, backward = 0, optimizer = 0, hook = 0, total = 0;
  int ranks = 0;
};

}  // namespace

RunProfile RunProfile::from_store(const db::Store& store, std::int64_t run_id) {
  const auto run = store.run(run_id);
  if (!run) throw db::Error("there is no run " + std::to_string(run_id) + " in " + store.path());
  std::map<std::int64_t, StepTimes> by_step;
  for (const auto& row : store.steps(run_id)) {
    auto& s = by_step[row.step];
    s.data += row.t_data;
    s.forward += row.t_forward;
    s.backward += row.t_backward;
    s.optimizer += row.t_optimizer;
    s.hook += row.t_hook;
    s.total += row.t_step;
    ++s.ranks;
  }
  if (by_step.size() < 4)
    throw db::Error("run " + std::to_string(run_id) + " has " + std::to_string(by_step.size()) +
                    " steps: too few to profile (at least 4)");
  // The steady steps, as every view counts them (run_metrics.h).
  const auto first_step =
      std::next(by_step.begin(), static_cast<std::ptrdiff_t>(first_steady_index(by_step.size())))->first;

  RunProfile p;
  p.run_id = run_id;
  p.world_size = static_cast<int>(run->world_size);
  // Collectives outside buckets run after the optimizer (parameter
  // averaging): their time is modelled on its own, not as optimizer time.
  const auto names = store.stat_names(run_id);
  std::map<std::int64_t, double> step_collective_s;
  for (const auto& name : names)
    if (net::parse_collective_stat(name, ".seconds"))
      for (const auto& point : store.stat(run_id, name))
        if (point.bucket == db::kWholeStep) step_collective_s[point.step] += point.value;
  std::vector<double> data, forward, backward, optimizer, hook, total;
  for (const auto& [step, s] : by_step) {
    if (step < first_step) continue;
    const double n = s.ranks;
    data.push_back(s.data / n);
    forward.push_back(s.forward / n);
    backward.push_back(s.backward / n);
    const auto collective = step_collective_s.find(step);
    optimizer.push_back(
        std::max(0.0, (s.optimizer - (collective == step_collective_s.end() ? 0 : collective->second)) / n));
    hook.push_back(s.hook / n);
    total.push_back(s.total / n);
  }
  p.steps = static_cast<std::int64_t>(total.size());
  p.data_s = median(data);
  p.forward_s = median(forward);
  p.backward_s = median(backward);
  p.optimizer_s = median(optimizer);
  p.hook_s = median(hook);
  p.measured_step_s = median(total);

  const std::set<std::string> have(names.begin(), names.end());
  if (!have.count("hook_inline_s"))
    throw db::Error("run " + std::to_string(run_id) +
                    " has no communication profile (it was recorded by an older commtune): run it again");
  p.hook_inline_s = steady_median(store.stat(run_id, "hook_inline_s"), first_step)[db::kWholeStep];

  std::map<std::int32_t, BucketProfile> buckets;
  for (const auto& [bucket, ready] : steady_median(store.stat(run_id, "ready_s"), first_step)) {
    buckets[bucket].index = bucket;
    buckets[bucket].ready_s = ready;
  }
  for (const auto& name : names) {
    const auto stat = net::parse_collective_stat(name, ".bytes");
    if (!stat) continue;
    const auto kind = stat->kind;
    const auto prefix = net::collective_stat_prefix(kind, stat->group);
    const auto bytes_points = store.stat(run_id, prefix + ".bytes");
    const auto calls_points = store.stat(run_id, prefix + ".calls");
    const auto seconds_points = store.stat(run_id, prefix + ".seconds");
    const auto bytes = steady_median(bytes_points, first_step);
    auto calls = steady_median(calls_points, first_step);
    auto local = steady_median(seconds_points, first_step);
    for (const auto& [bucket, b] : bytes) {
      if (bucket == db::kWholeStep) {
        const auto mean = [&](const std::vector<db::StatPoint>& points) {
          return steady_mean(points, first_step, p.steps, p.world_size);
        };
        p.step_collectives.push_back({kind, stat->group, mean(bytes_points), mean(calls_points), mean(seconds_points)});
      } else {
        buckets[bucket].index = bucket;
        buckets[bucket].collectives.push_back({kind, stat->group, b, calls[bucket], local[bucket]});
      }
    }
  }
  const auto layouts = store.events(run_id, "buckets");
  if (!layouts.empty())
    for (const auto& b : layouts.back().body.value("buckets", nlohmann::json::array())) {
      const auto index = b.value("index", -1);
      if (buckets.count(index)) buckets[index].fp32_bytes = b.value("bytes", 0.0);
    }
  for (auto& [index, bucket] : buckets) p.buckets.push_back(std::move(bucket));
  return p;
}

double RunProfile::collective_bytes() const {
  double sum = 0;
  for (const auto& b : buckets)
    for (const auto& c : b.collectives) sum += c.bytes;
  for (const auto& c : step_collectives) sum += c.bytes;
  return sum;
}

nlohmann::json RunProfile::to_json() const {
  auto uses = [](const std::vector<CollectiveUse>& v) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : v) {
      nlohmann::json use{
          {"kind", net::to_string(c.kind)}, {"bytes", c.bytes}, {"calls", c.calls}, {"local_s", c.local_s}};
      if (!c.group.whole()) use["group"] = {{"size", c.group.size}, {"stride", c.group.stride}};
      out.push_back(use);
    }
    return out;
  };
  nlohmann::json buckets_json = nlohmann::json::array();
  for (const auto& b : buckets)
    buckets_json.push_back({{"index", b.index},
                            {"ready_s", b.ready_s},
                            {"fp32_bytes", b.fp32_bytes},
                            {"collectives", uses(b.collectives)}});
  return {{"run_id", run_id},
          {"world_size", world_size},
          {"steps_profiled", steps},
          {"data_s", data_s},
          {"forward_s", forward_s},
          {"backward_s", backward_s},
          {"optimizer_s", optimizer_s},
          {"hook_s", hook_s},
          {"hook_inline_s", hook_inline_s},
          {"measured_step_s", measured_step_s},
          {"buckets", buckets_json},
          {"step_collectives", uses(step_collectives)}};
}

nlohmann::json StepPrediction::to_json() const {
  return {{"step_s", step_s}, {"compute_s", compute_s}, {"communication_s", communication_s}, {"exposed_s", exposed_s}};
}

StepPrediction predict(const RunProfile& p, const net::Cluster& cluster) {
  // Per bucket (or per step, outside buckets): the collectives' time on the
  // target link alone, and with each call taking at least what it took here.
  auto link_time = [&](const std::vector<CollectiveUse>& uses) {
    double t = 0;
    for (const auto& c : uses)
      if (c.calls > 0) t += c.calls * net::collective_time(c.kind, c.bytes / c.calls, cluster, c.group);
    return t;
  };
  auto floored_time = [&](const std::vector<CollectiveUse>& uses) {
    double t = 0;
    for (const auto& c : uses)
      if (c.calls > 0)
        t += c.calls * std::max(net::collective_time(c.kind, c.bytes / c.calls, cluster, c.group), c.local_s / c.calls);
    return t;
  };
  // Hook work off the backward thread (a may-block hook's own thread) sits in
  // the buckets' chains, shared out by bucket size.
  const double off_thread_hook = std::max(0.0, p.hook_s - p.hook_inline_s);
  double total_bytes = 0;
  for (const auto& b : p.buckets) total_bytes += b.fp32_bytes;

  StepPrediction out;
  // The link carries one bucket at a time; the work around each collective
  // (reductions, casts) runs as it did here, buckets side by side.
  double link_free = 0, last_end = 0;
  for (const auto& b : p.buckets) {
    const double share = total_bytes > 0 ? b.fp32_bytes / total_bytes : 1.0 / static_cast<double>(p.buckets.size());
    const double start = std::min(b.ready_s, p.backward_s) + off_thread_hook * share;
    const double on_link = link_time(b.collectives);
    out.communication_s += on_link;
    link_free = std::max(link_free, start) + on_link;
    last_end = std::max({last_end, link_free, start + floored_time(b.collectives)});
  }
  const double step_comm = floored_time(p.step_collectives);
  out.communication_s += link_time(p.step_collectives);
  out.compute_s = p.data_s + p.forward_s + p.backward_s + p.optimizer_s;
  out.exposed_s = std::max(0.0, last_end - p.backward_s) + step_comm;
  out.step_s = out.compute_s + out.exposed_s;
  return out;
}

std::string TargetCompute::describe() const {
  char text[200];
  switch (kind) {
    case Kind::Measured:
      return "compute: each run's own, as measured";
    case Kind::Scaled:
      std::snprintf(text, sizeof text, "compute: each run's measured x %g", scale);
      return text;
    case Kind::Given:
      std::snprintf(text, sizeof text, "compute: forward %.3g ms, backward %.3g ms per step (given)",
                    1e3 * forward_s, 1e3 * backward_s);
      return text;
    case Kind::FromRun:
      std::snprintf(text, sizeof text, "compute: run %lld's (forward %.3g ms, backward %.3g ms per step)",
                    static_cast<long long>(target_run->run_id), 1e3 * target_run->forward_s,
                    1e3 * target_run->backward_s);
      return text;
  }
  return "";
}

RunProfile on_target(const RunProfile& measured, const TargetCompute& compute) {
  if (compute.kind == TargetCompute::Kind::Measured) return measured;
  const double measured_fb = measured.forward_s + measured.backward_s;
  double scale = compute.scale, forward = 0, backward = 0;
  if (compute.kind == TargetCompute::Kind::Given) forward = compute.forward_s, backward = compute.backward_s;
  if (compute.kind == TargetCompute::Kind::FromRun)
    forward = compute.target_run->forward_s, backward = compute.target_run->backward_s;
  if (compute.kind != TargetCompute::Kind::Scaled) scale = measured_fb > 0 ? (forward + backward) / measured_fb : 1;
  const double ready_scale =
      compute.kind == TargetCompute::Kind::Scaled || measured.backward_s <= 0 ? scale : backward / measured.backward_s;

  auto p = measured;
  for (double* t : {&p.data_s, &p.forward_s, &p.backward_s, &p.optimizer_s, &p.hook_s, &p.hook_inline_s}) *t *= scale;
  for (auto& b : p.buckets) {
    b.ready_s *= ready_scale;
    for (auto& c : b.collectives) c.local_s *= scale;
  }
  for (auto& c : p.step_collectives) c.local_s *= scale;
  if (compute.kind != TargetCompute::Kind::Scaled) p.forward_s = forward, p.backward_s = backward;
  if (compute.kind == TargetCompute::Kind::FromRun) {
    p.data_s = compute.target_run->data_s;
    p.optimizer_s = compute.target_run->optimizer_s;
  }
  return p;
}

}  // namespace commtune

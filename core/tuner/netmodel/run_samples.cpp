#include "core/tuner/netmodel/run_samples.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/tuner/store/run_metrics.h"

namespace commtune {

namespace {

// How a step's figure is made from its ranks' values.
enum class OverRanks {
  Mean,
  // The least: the time a collective or a chain took on the rank that came
  // to it last. Every rank leaves it together, so a rank that came earlier
  // also waited for that one; on a loaded machine such a wait is a
  // descheduled peer (a timeslice, milliseconds), which the target's
  // machines do not share. A peer slower in its compute is compute's part.
  Least,
};

// Per steady step, the ranks' values in `bucket` made one as `over` says;
// `missing` where no rank reported it. Runs store what this derives
// (RunSamples::kStoredFormat): a change to it bumps that.
std::vector<double> per_step(const std::vector<db::StatPoint>& points, std::int32_t bucket,
                             const std::map<std::int64_t, std::size_t>& index, double missing,
                             OverRanks over = OverRanks::Mean) {
  std::vector<double> sum(index.size(), 0.0);
  std::vector<int> count(index.size(), 0);
  for (const auto& p : points) {
    if (p.bucket != bucket) continue;
    const auto at = index.find(p.step);
    if (at == index.end()) continue;
    auto& figure = sum[at->second];
    if (over == OverRanks::Mean)
      figure += p.value;
    else
      figure = count[at->second] ? std::min(figure, p.value) : p.value;
    ++count[at->second];
  }
  for (std::size_t i = 0; i < sum.size(); ++i)
    sum[i] = count[i] ? (over == OverRanks::Mean ? sum[i] / count[i] : sum[i]) : missing;
  return sum;
}

std::set<std::int32_t> buckets_of(const std::vector<db::StatPoint>& points) {
  std::set<std::int32_t> out;
  for (const auto& p : points) out.insert(p.bucket);
  return out;
}

double median_at(const std::vector<double>& values, const std::vector<std::size_t>& picks) {
  std::vector<double> chosen;
  chosen.reserve(picks.size());
  for (const auto i : picks)
    if (!std::isnan(values[i])) chosen.push_back(values[i]);
  return chosen.empty() ? 0.0 : median(std::move(chosen));
}

double mean_at(const std::vector<double>& values, const std::vector<std::size_t>& picks) {
  double sum = 0;
  for (const auto i : picks) sum += values[i];
  return picks.empty() ? 0.0 : sum / static_cast<double>(picks.size());
}

}  // namespace

RunSamples RunSamples::from_store(const db::Store& store, std::int64_t run_id) {
  const auto run = store.run(run_id);
  if (!run) throw db::Error("there is no run " + std::to_string(run_id) + " in " + store.path());
  return from_store(store, *run);
}

// What this derives is stored as runs end (encode): a change to it bumps kStoredFormat.
RunSamples RunSamples::from_store(const db::Store& store, const db::RunRecord& run) {
  const auto run_id = run.id;
  struct Sums {
    double data = 0, forward = 0, backward = 0, optimizer = 0, hook = 0, total = 0, wire = 0, uncompressed = 0;
    int ranks = 0;
  };
  std::map<std::int64_t, Sums> by_step;
  for (const auto& row : store.steps(run_id)) {
    // A time the store does not hold as a number of at least 0 (NULL, text: a damaged or edited row) is missing.
    for (const auto& [name, value] : {std::pair{"t_data", row.t_data}, {"t_forward", row.t_forward},
                                      {"t_backward", row.t_backward}, {"t_optimizer", row.t_optimizer},
                                      {"t_hook", row.t_hook}, {"t_step", row.t_step}})
      if (!(value >= 0))
        throw db::Error("run " + std::to_string(run_id) + " has no " + name + " for rank " + std::to_string(row.rank) +
                        " at step " + std::to_string(row.step) + " in the store (it holds " +
                        (std::isnan(value) ? std::string("no number") : std::to_string(value)) +
                        "): its profile cannot be read");
    auto& s = by_step[row.step];
    s.data += row.t_data;
    s.forward += row.t_forward;
    s.backward += row.t_backward;
    s.optimizer += row.t_optimizer;
    s.hook += row.t_hook;
    s.total += row.t_step;
    s.wire += static_cast<double>(row.wire_bytes);
    s.uncompressed += static_cast<double>(row.uncompressed_bytes);
    ++s.ranks;
  }
  if (by_step.size() < 4)
    throw db::Error("run " + std::to_string(run_id) + " has " + std::to_string(by_step.size()) +
                    " steps: too few to profile (at least 4)");
  const auto names = store.stat_names(run_id);
  if (std::find(names.begin(), names.end(), "hook_inline_s") == names.end())
    throw db::Error("run " + std::to_string(run_id) +
                    " has no communication profile (it was recorded by an older commtune): run it again");

  // A run commtune recorded had at least one rank; a store edited by hand may say otherwise.
  if (run.world_size < 1 || run.world_size > (std::int64_t{1} << 20))
    throw db::Error("run " + std::to_string(run_id) + " says it had " + std::to_string(run.world_size) +
                    " ranks: not a run commtune recorded");
  RunSamples s;
  s.run_id = run_id;
  s.world_size = static_cast<int>(run.world_size);
  // The steady steps, as every view counts them (run_metrics.h).
  std::map<std::int64_t, std::size_t> index;
  for (auto it = std::next(by_step.begin(), static_cast<std::ptrdiff_t>(first_steady_index(by_step.size())));
       it != by_step.end(); ++it) {
    index[it->first] = s.steps.size();
    s.steps.push_back(it->first);
  }

  // Collectives outside buckets run after the optimizer (parameter
  // averaging): their time is modelled on its own, not as optimizer time,
  // which is each rank's, so each rank's own collective time (its waits
  // included) is what leaves it.
  std::vector<double> step_collective_s(s.steps.size(), 0.0);
  for (const auto& name : names) {
    const auto stat = net::parse_collective_stat(name, ".bytes");
    if (!stat) continue;
    const auto prefix = net::collective_stat_prefix(stat->kind, stat->group);
    const auto bytes = store.stat(run_id, prefix + ".bytes");
    const auto calls = store.stat(run_id, prefix + ".calls");
    const auto seconds = store.stat(run_id, prefix + ".seconds");
    for (const auto bucket : buckets_of(bytes)) {
      const double missing = bucket == db::kWholeStep ? 0.0 : NAN;
      CollectiveSeries c{stat->kind, stat->group, bucket, per_step(bytes, bucket, index, missing),
                         per_step(calls, bucket, index, missing),
                         per_step(seconds, bucket, index, missing, OverRanks::Least)};
      if (bucket == db::kWholeStep) {
        const auto own = per_step(seconds, bucket, index, missing);
        for (std::size_t i = 0; i < own.size(); ++i) step_collective_s[i] += own[i];
      }
      s.collectives.push_back(std::move(c));
    }
  }
  const auto inline_points = store.stat(run_id, "hook_inline_s");
  s.hook_inline = per_step(inline_points, db::kWholeStep, index, 0.0);
  for (const auto& [step, i] : index) {
    const auto& sums = by_step.at(step);
    const double n = sums.ranks;
    s.data.push_back(sums.data / n);
    s.forward.push_back(sums.forward / n);
    s.backward.push_back(sums.backward / n);
    s.pure_backward.push_back(std::max(0.0, sums.backward / n - s.hook_inline[i]));
    s.optimizer.push_back(std::max(0.0, sums.optimizer / n - step_collective_s[i]));
    s.hook.push_back(sums.hook / n);
    s.total.push_back(sums.total / n);
    s.wire_bytes.push_back(sums.wire / n);
    s.uncompressed_bytes.push_back(sums.uncompressed / n);
  }
  const auto ready = store.stat(run_id, "ready_s");
  for (const auto bucket : buckets_of(ready)) s.ready[bucket] = per_step(ready, bucket, index, NAN);
  const auto chain = store.stat(run_id, "chain_s");
  for (const auto bucket : buckets_of(chain)) s.chain[bucket] = per_step(chain, bucket, index, NAN, OverRanks::Least);
  const auto work = store.stat(run_id, "hook_work_s");
  for (const auto bucket : buckets_of(work)) s.work[bucket] = per_step(work, bucket, index, NAN);
  const auto starts = store.events(run_id, "run_start");
  if (!starts.empty() && starts.back().body.is_object()) {
    const auto& start = starts.back().body;
    if (start.contains("hook_blocking") && start["hook_blocking"].is_boolean()) s.serial_hook = start["hook_blocking"];
    const auto probe = start.value("link_probe", nlohmann::json());
    s.link = link_from_probe(probe, s.world_size);
  }
  const auto layouts = store.events(run_id, "buckets");
  if (!layouts.empty())
    for (const auto& b : layouts.back().body.value("buckets", nlohmann::json::array()))
      if (b.is_object() && b.value("index", -1) >= 0) s.bucket_fp32_bytes[b.value("index", -1)] = b.value("bytes", 0.0);
  return s;
}

std::optional<net::LinkProbe> stored_link(const db::RunRecord& run) {
  if (run.world_size < 1 || run.world_size > (std::int64_t{1} << 20)) return net::LinkProbe{};
  // An ended run's digest holds its probe (finish_run_with_digest).
  if (!db::status::is_end(run.status) || !run.digest.is_object()) return std::nullopt;
  const auto probe = run.digest.find("link_probe");
  if (probe == run.digest.end()) return std::nullopt;
  try {
    return link_from_probe(*probe, static_cast<int>(run.world_size));
  } catch (const db::Error&) {  // an unreadable probe: not probed
    return net::LinkProbe{};
  }
}

net::LinkProbe run_link(const db::Store& store, const db::RunRecord& run) {
  if (const auto stored = stored_link(run)) return *stored;
  try {  // else its start event does
    return link_from_probe(store.last_event_member(run.id, "run_start", "link_probe"),
                           static_cast<int>(run.world_size));
  } catch (const db::Error&) {  // an unreadable start event: not probed, as a run without one
    return {};
  }
}

// Runs store what this derives (RunSamples::kStoredFormat): a change to it bumps that.
net::LinkProbe link_from_probe(const nlohmann::json& probe, int ranks) {
  const auto numbers = [&](const char* key, std::size_t most) {
    std::vector<double> out;
    const auto list = probe.value(key, nlohmann::json());
    if (!list.is_array() || list.size() > most) return out;
    for (const auto& x : list)
      if (x.is_number()) out.push_back(x.get<double>());
    return out.size() == list.size() ? out : std::vector<double>{};
  };
  net::LinkProbe link;
  if (!probe.is_object()) return link;
  const auto bytes = numbers("bytes", 2), seconds = numbers("seconds", 2);
  if (bytes.size() != 2 || seconds.size() != 2) return link;
  link.bytes_per_s = net::probed_bandwidth(bytes[0], seconds[0], bytes[1], seconds[1], ranks);
  // Bounds from the attempts (network.h, LinkProbe): the transfer took no
  // longer than the large message's best attempt, and at least that less
  // the small one's median or twice its best, whichever is more (a wait for
  // the scheduler, a timeslice, can hold every attempt of both alike: then
  // only a large message that took over twice the small one's time bounds
  // the link from above).
  const auto attempts = probe.value("attempts", nlohmann::json());
  if (!attempts.is_array() || attempts.size() != 2) return link;
  std::vector<double> best, median;
  for (const auto& list : attempts) {
    if (!list.is_array() || list.empty() || list.size() > 64) return link;
    std::vector<double> times;
    for (const auto& x : list)
      if (x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() > 0) times.push_back(x.get<double>());
    if (times.size() != list.size()) return link;
    std::sort(times.begin(), times.end());
    best.push_back(times.front());
    median.push_back(times[times.size() / 2]);
  }
  const double transfer = seconds[1] - seconds[0], shortest = best[1] - std::max(median[0], 2 * best[0]);
  if (!(link.bytes_per_s > 0)) return link;
  link.slower = std::max(1.0, best[1] / transfer);
  link.faster = shortest > 0 ? std::clamp(transfer / shortest, 1.0, net::kUnbounded) : net::kUnbounded;
  return link;
}

void RunSamples::scale_hook_times(double factor) {
  const auto scale = [factor](std::vector<double>& v) {
    for (auto& x : v) x *= factor;
  };
  scale(hook);
  scale(hook_inline);
  for (auto& [bucket, series] : chain) scale(series);
  for (auto& [bucket, series] : work) scale(series);
  for (auto& c : collectives) scale(c.seconds);
}

RunProfile RunSamples::profile() const {
  std::vector<std::size_t> all(steps.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  return profile(all);
}

RunProfile RunSamples::profile(const std::vector<std::size_t>& picks) const {
  RunProfile p;
  p.run_id = run_id;
  p.world_size = world_size;
  p.steps = static_cast<std::int64_t>(picks.size());
  p.data_s = median_at(data, picks);
  p.forward_s = median_at(forward, picks);
  p.backward_s = median_at(backward, picks);
  p.optimizer_s = median_at(optimizer, picks);
  p.hook_s = median_at(hook, picks);
  p.hook_inline_s = median_at(hook_inline, picks);
  p.measured_step_s = median_at(total, picks);
  p.serial_hook = serial_hook;
  p.link_bytes_per_s = link.bytes_per_s;

  std::map<std::int32_t, BucketProfile> buckets;
  for (const auto& [bucket, series] : ready) {
    buckets[bucket].index = bucket;
    buckets[bucket].ready_s = median_at(series, picks);
  }
  for (const auto& [bucket, series] : chain) {
    buckets[bucket].index = bucket;
    buckets[bucket].chain_s = median_at(series, picks);
    buckets[bucket].measured_chain = true;
  }
  for (const auto& [bucket, series] : work) buckets[bucket].work_s = median_at(series, picks);
  for (const auto& c : collectives) {
    // Collectives the picked steps did not issue (only before the steady steps, say) are not part of it.
    if (c.bucket == db::kWholeStep) {
      const CollectiveUse use{c.kind, c.group, mean_at(c.bytes, picks), mean_at(c.calls, picks),
                              mean_at(c.seconds, picks)};
      if (use.calls > 0) p.step_collectives.push_back(use);
      continue;
    }
    const CollectiveUse use{c.kind, c.group, median_at(c.bytes, picks), median_at(c.calls, picks),
                            median_at(c.seconds, picks)};
    if (use.calls <= 0) continue;
    auto& b = buckets[c.bucket];
    b.index = c.bucket;
    b.collectives.push_back(use);
  }
  for (auto& [index, bucket] : buckets) {
    if (const auto bytes = bucket_fp32_bytes.find(index); bytes != bucket_fp32_bytes.end())
      bucket.fp32_bytes = bytes->second;
    p.buckets.push_back(std::move(bucket));
  }
  return p;
}

}  // namespace commtune

namespace commtune {

RunProfile RunProfile::from_store(const db::Store& store, std::int64_t run_id) {
  return RunSamples::from_store(store, run_id).profile();
}

}  // namespace commtune

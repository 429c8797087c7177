#include "core/tuner/verdict/evidence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/tuner/config/hook_activity.h"
#include "core/tuner/store/run_label.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/sweep/draw.h"
#include "db/parallel.h"

namespace commtune {

namespace {

// Keys of a run's configuration that are bookkeeping, not training: where
// checkpoints and dumps go, how long to wait for a peer, what to do on NaN.
const std::vector<std::string> kBookkeeping = {
    "seed",         "checkpoint",           "timeout_s",          "on_nonfinite",           "threads",
    "cpu_affinity", "weights.save_initial", "weights.save_final", "debug.dump_grads_steps", "debug.dump_dir"};

// Appends a value to an identity key: a compact encoding in which two
// values are written alike exactly when their JSON texts are alike (an
// integer is one whether parsed signed or unsigned; a real keeps its bits,
// as its shortest text does), without formatting a single number: identity
// keys are written for every run read (10^5 at a time).
void append_bytes(std::string& out, char tag, const void* bytes, std::size_t size) {
  out += tag;
  out.append(static_cast<const char*>(bytes), size);
}

void append_text(std::string& out, const std::string& text) {
  const auto size = static_cast<std::uint64_t>(text.size());
  append_bytes(out, 's', &size, sizeof size);
  out += text;
}

void append_scalar(std::string& out, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::number_integer: {
      const auto v = j.get<std::int64_t>();
      append_bytes(out, 'i', &v, sizeof v);
      break;
    }
    case nlohmann::json::value_t::number_unsigned: {
      const auto v = j.get<std::uint64_t>();
      append_bytes(out, v <= static_cast<std::uint64_t>(INT64_MAX) ? 'i' : 'u', &v, sizeof v);
      break;
    }
    case nlohmann::json::value_t::number_float: {
      const auto v = j.get<double>();
      append_bytes(out, 'f', &v, sizeof v);
      break;
    }
    case nlohmann::json::value_t::string:
      append_text(out, j.get_ref<const std::string&>());
      break;
    case nlohmann::json::value_t::boolean:
      out += j.get<bool>() ? 'T' : 'F';
      break;
    case nlohmann::json::value_t::array:
      out += '[';
      for (const auto& item : j) append_scalar(out, item);
      out += ']';
      break;
    case nlohmann::json::value_t::object:
      out += '{';
      for (const auto& [key, value] : j.items()) {
        append_text(out, key);
        append_scalar(out, value);
      }
      out += '}';
      break;
    default:  // null, and what parsing never gives
      out += 'n';
  }
}

// Where a member at a path lies in an identity key being written: its key and value.
struct Span {
  std::string path;
  std::size_t begin = 0, end = 0;  // empty: the configuration has no such member
};

// The configuration without the keys at `omitted` (paths such as
// "weights.save_final" or "optimizer.lr") as an identity key, written in one
// walk instead of copying the tree. Each of `marks` receives where the member
// at its path lies in `out`, so that keys without it are cut from this one.
void append_without(std::string& out, const nlohmann::json& j, const std::vector<std::string>& omitted,
                    std::string& path, std::vector<Span>* marks = nullptr) {
  const auto below = [&](const std::string& p, const std::string& o) {
    return o.size() > p.size() && o.compare(0, p.size(), p) == 0 && o[p.size()] == '.';
  };
  const auto inside = [&](const std::string& p) {  // some omitted or marked path lies below p
    return std::any_of(omitted.begin(), omitted.end(), [&](const std::string& o) { return below(p, o); }) ||
           (marks && std::any_of(marks->begin(), marks->end(), [&](const Span& m) { return below(p, m.path); }));
  };
  if (!j.is_object() || (!path.empty() && !inside(path))) {
    append_scalar(out, j);
    return;
  }
  out += '{';
  const auto length = path.size();
  for (const auto& [key, value] : j.items()) {
    if (length) path += '.';
    path += key;
    if (std::find(omitted.begin(), omitted.end(), path) == omitted.end()) {
      const auto start = out.size();
      append_text(out, key);
      append_without(out, value, omitted, path, marks);
      if (marks)
        for (auto& m : *marks)
          if (m.path == path) m.begin = start, m.end = out.size();
    }
    path.resize(length);
  }
  out += '}';
}

// The replicate key; cut from it, the baseline key (the same without the
// hook) and the timing key (without the learning rate); and the hook's part
// of it (alike exactly when the hooks are).
struct IdentityKeys {
  std::string replicate, baseline, timing, hook;
};

IdentityKeys identity_keys(const nlohmann::json& config) {
  if (!config.is_object()) return {"{}", "{}", "{}", ""};
  std::string out, path;
  out.reserve(2048);  // a configuration's key, written without growing it again and again
  std::vector<Span> marks{{"hook"}, {"optimizer.lr"}};
  append_without(out, config, kBookkeeping, path, &marks);
  const auto without = [&](const Span& m) { return std::string(out).erase(m.begin, m.end - m.begin); };
  IdentityKeys keys{
      {}, without(marks[0]), without(marks[1]), out.substr(marks[0].begin, marks[0].end - marks[0].begin)};
  keys.replicate = std::move(out);
  return keys;
}

double percentile(std::vector<double> values, double q) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(at));
  const auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (at - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Estimate from_replicates(double value, const std::vector<double>& replicates) {
  Estimate e;
  e.value = value;
  if (replicates.size() >= 2) {
    e.low = percentile(replicates, 0.025);
    e.high = percentile(replicates, 0.975);
  }
  return e;
}

// The seed of a pool's replicate: the bootstrap's seed, the pool and the
// replicate mixed (splitmix64's finaliser at each step), so that no two
// replicates, and no replicate and a configuration's draws (seeded by
// small sums), share a stream by the arithmetic of their numbers.
std::uint64_t replicate_seed(std::uint64_t seed, std::size_t pool, std::size_t replicate) {
  const auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  return mix(mix(mix(seed ^ 0x706f6f6c) ^ pool) ^ replicate);  // "pool"
}

// "matrix_approximation_rank=4 lr=0.1 seed=2" -> without the seed: replicates share one label.
std::string without_seed(const std::string& name) {
  const auto at = name.rfind("seed=");
  if (at == std::string::npos || (at > 0 && name[at - 1] != ' ') || at + 5 == name.size() ||
      name.find_first_not_of("0123456789", at + 5) != std::string::npos)
    return name;
  return name.substr(0, at > 0 ? at - 1 : 0);
}

// What Evidence::gather reads from one run alone, before runs are grouped
// into configurations: safe on any thread (it touches no store).
struct RunFacts {
  IdentityKeys keys;
  std::string compute;  // compute_key, when profiles are read
  std::string hook, label;
  std::string fingerprint_family;  // model and data
  bool plain_allreduce = false;
  std::int64_t seed = 0;
  std::optional<RunDigest> digest;     // the one it stored as it ended
  std::optional<net::LinkProbe> link;  // the one its digest holds
  std::optional<RunSamples> samples;
  bool unreadable = false;  // its stored profile could not be decoded: `problem` says why
  std::string problem;      // why it has no samples
};

RunFacts run_facts(const db::RunRecord& run, std::string* stored_samples) {
  RunFacts f;
  f.keys = identity_keys(run.config);
  f.hook = describe_hook(run);
  f.label = run.name.empty() ? f.hook : without_seed(run.name);
  if (f.label.empty()) f.label = f.hook;
  f.plain_allreduce = is_plain_allreduce(run.config);
  for (const char* key : {"model", "data"}) {
    const auto at = run.config.is_object() ? run.config.find(key) : run.config.end();
    append_scalar(f.fingerprint_family, at != run.config.end() ? *at : nlohmann::json());
  }
  f.seed = run.config.is_object() ? run.config.value("seed", std::int64_t{0}) : 0;
  f.digest = stored_digest(run);
  if (stored_samples) {  // profiles are read: the compute pools need their keys
    f.compute = compute_key(run.config);
    try {
      f.samples = RunSamples::decode(*stored_samples, run.id, run.world_size);
    } catch (const db::Error& error) {
      f.unreadable = true;
      f.problem = error.what();
    }
    std::string().swap(*stored_samples);  // freed as it goes: 10^5 of them
  }
  if (!f.samples) f.link = stored_link(run);
  return f;
}

// Several runs' steps as one run's, for resampling a replicated configuration.
// Series a run lacks are NaN (per bucket) or 0 (outside buckets) there.
RunSamples concatenate(const std::vector<RunSamples>& runs, std::vector<std::size_t>& offsets) {
  RunSamples out = runs.front();
  offsets = {0};
  using Key = std::tuple<int, int, int, std::int32_t>;
  const auto key = [](const CollectiveSeries& c) {
    return Key{static_cast<int>(c.kind), c.group.size, c.group.stride, c.bucket};
  };
  for (std::size_t r = 1; r < runs.size(); ++r) {
    const auto& s = runs[r];
    offsets.push_back(out.steps.size());
    const auto before = out.steps.size();
    const auto append = [](std::vector<double>& to, const std::vector<double>& from) {
      to.insert(to.end(), from.begin(), from.end());
    };
    append(out.data, s.data);
    append(out.forward, s.forward);
    append(out.backward, s.backward);
    append(out.pure_backward, s.pure_backward);
    append(out.optimizer, s.optimizer);
    append(out.hook, s.hook);
    append(out.hook_inline, s.hook_inline);
    append(out.total, s.total);
    append(out.wire_bytes, s.wire_bytes);
    append(out.uncompressed_bytes, s.uncompressed_bytes);
    out.steps.insert(out.steps.end(), s.steps.begin(), s.steps.end());
    const auto after = out.steps.size();
    using Series = std::map<std::int32_t, std::vector<double>> RunSamples::*;
    for (const Series field : {&RunSamples::ready, &RunSamples::chain, &RunSamples::work}) {
      for (const auto& [bucket, series] : s.*field) {
        auto& to = (out.*field)[bucket];
        to.resize(before, NAN);
        append(to, series);
      }
      for (auto& [bucket, series] : out.*field) series.resize(after, NAN);
    }
    for (const auto& c : s.collectives) {
      auto at = std::find_if(out.collectives.begin(), out.collectives.end(),
                             [&](const CollectiveSeries& o) { return key(o) == key(c); });
      if (at == out.collectives.end()) {
        out.collectives.push_back({c.kind, c.group, c.bucket, {}, {}, {}});
        at = std::prev(out.collectives.end());
      }
      const double missing = c.bucket == db::kWholeStep ? 0.0 : NAN;
      for (auto* v : {&at->bytes, &at->calls, &at->seconds}) v->resize(before, missing);
      append(at->bytes, c.bytes);
      append(at->calls, c.calls);
      append(at->seconds, c.seconds);
    }
    for (auto& c : out.collectives) {
      const double missing = c.bucket == db::kWholeStep ? 0.0 : NAN;
      for (auto* v : {&c.bytes, &c.calls, &c.seconds}) v->resize(after, missing);
    }
  }
  return out;
}

// Steps of runs picked with replacement, each run's steps picked with
// replacement: indices into the concatenation at `offsets` of runs of `sizes`.
std::vector<std::size_t> two_level_picks(Draw& draw, const std::vector<std::size_t>& offsets,
                                         const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> picks;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    const auto run = draw.index(sizes.size());
    for (std::size_t k = 0; k < sizes[run]; ++k) picks.push_back(offsets[run] + draw.index(sizes[run]));
  }
  return picks;
}

// A configuration's own profile with the pool's compute: data, forward and
// optimizer are the pool's; backward is the pool's pure backward plus this
// configuration's own hook work on the backward thread, and its buckets
// become ready at the same fractions of backward as they did.
RunProfile with_compute(RunProfile p, const std::array<double, 4>& pool) {
  const double backward = pool[2] + p.hook_inline_s;
  const double scale = p.backward_s > 0 ? backward / p.backward_s : 1.0;
  for (auto& b : p.buckets) b.ready_s *= scale;
  p.data_s = pool[0];
  p.forward_s = pool[1];
  p.backward_s = backward;
  p.optimizer_s = pool[3];
  return p;
}

// The leaves of a configuration outside the bookkeeping and the hook, as JSON text by path.
void flatten_outside_hook(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (prefix == "hook" || std::find(kBookkeeping.begin(), kBookkeeping.end(), prefix) != kBookkeeping.end()) return;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten_outside_hook(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  if (!prefix.empty()) out[prefix] = j.dump();  // a configuration that is no object has no parameters
}

// The median over a run's steps of the time outside its compute: the
// collectives it waited for, the hook's work, waiting for a peer. Zero for
// a run with one rank, whose steps wait for nobody.
double time_outside_compute(const RunSamples& s) {
  if (s.world_size < 2) return 0;
  std::vector<double> outside;
  for (std::size_t i = 0; i < s.size(); ++i)
    outside.push_back(s.total[i] - s.data[i] - s.forward[i] - s.pure_backward[i] - s.optimizer[i]);
  return outside.empty() ? 0 : median(std::move(outside));
}

// "fp16 (link 12.5 MB/s)", or "(on node7, link ...)" when the host differs from the first's.
std::string measured_where(const Configuration& c, const Configuration& first) {
  const auto base = c.label.substr(0, c.label.find(" (measured "));
  char link[64] = "link not probed";
  if (c.link.bytes_per_s > 0) std::snprintf(link, sizeof link, "link %.3g MB/s", c.link.bytes_per_s / 1e6);
  return base + " (measured " + (c.host != first.host ? "on " + c.host + ", " : std::string()) + link + ")";
}

}  // namespace

RunToRun RunToRun::from_groups(const std::map<std::string, std::vector<double>>& log_times) {
  RunToRun r;
  double squares = 0;
  for (const auto& [key, logs] : log_times) {
    if (logs.size() < 2) continue;
    const double mean = std::accumulate(logs.begin(), logs.end(), 0.0) / static_cast<double>(logs.size());
    for (const double l : logs) squares += (l - mean) * (l - mean);
    r.degrees_of_freedom += static_cast<int>(logs.size()) - 1;
    r.repeated_runs += static_cast<int>(logs.size());
  }
  if (r.degrees_of_freedom == 0) return r;
  r.measured_log_sd = std::sqrt(squares / r.degrees_of_freedom);
  r.log_sd = std::sqrt((squares + kAssumedWeight * kAssumedLogSd * kAssumedLogSd) /
                       (r.degrees_of_freedom + kAssumedWeight));
  return r;
}

std::string RunToRun::describe() const {
  char text[300];
  if (std::isnan(measured_log_sd))
    std::snprintf(text, sizeof text,
                  "run-to-run spread of the time outside compute: x%.2f, assumed (no configuration here ran twice: "
                  "repeat one, or sweep with --seeds, to measure it)",
                  std::exp(log_sd));
  else
    std::snprintf(text, sizeof text,
                  "run-to-run spread of the time outside compute: x%.2f (x%.2f measured over %d repeated runs, "
                  "weighed with the assumed x%.2f)",
                  std::exp(log_sd), std::exp(measured_log_sd), repeated_runs, std::exp(kAssumedLogSd));
  return text;
}

nlohmann::json RunToRun::to_json() const {
  return {{"log_sd", log_sd},
          {"measured_log_sd", std::isnan(measured_log_sd) ? nlohmann::json(nullptr) : nlohmann::json(measured_log_sd)},
          {"degrees_of_freedom", degrees_of_freedom},
          {"repeated_runs", repeated_runs},
          {"text", describe()}};
}

bool Estimate::includes(double x) const { return has_interval() ? low <= x && x <= high : value == x; }

nlohmann::json Estimate::to_json() const {
  const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"value", number(value)}, {"low", number(low)}, {"high", number(high)}};
}

LossChange::Judgement LossChange::judge(double tolerance) const {
  if (std::isnan(change.value) || change.value == INFINITY) return Judgement::Beyond;
  if (!change.has_interval()) return change.value <= tolerance ? Judgement::Within : Judgement::Beyond;
  if (change.high <= tolerance) return Judgement::Within;
  if (change.low > tolerance) return Judgement::Beyond;
  return Judgement::Uncertain;
}

std::string LossChange::describe() const {
  char text[160];
  if (!std::isfinite(change.value)) return change.value > 0 ? "diverged" : "unknown";
  if (change.has_interval())
    std::snprintf(text, sizeof text, "%+.2f%% (95%%: %+.2f..%+.2f%%, %d %s)", 100 * change.value, 100 * change.low,
                  100 * change.high, pairs > 0 ? pairs : 0, pairs > 0 ? "seeds" : "runs, unpaired");
  else
    std::snprintf(text, sizeof text, "%+.2f%% (one seed: spread unknown)", 100 * change.value);
  return text;
}

bool Configuration::all_succeeded() const {
  return std::all_of(statuses.begin(), statuses.end(), [](const std::string& s) { return s == db::status::kSucceeded; });
}

std::map<std::int64_t, double> Configuration::seed_losses() const {
  std::map<std::int64_t, std::pair<double, int>> sums;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (tail_losses[i]) {
      auto& [sum, n] = sums[seeds[i]];
      sum += *tail_losses[i];
      ++n;
    }
  std::map<std::int64_t, double> out;
  for (const auto& [seed, sum_n] : sums) out[seed] = sum_n.first / sum_n.second;
  return out;
}

std::size_t Configuration::seed_count() const { return std::set<std::int64_t>(seeds.begin(), seeds.end()).size(); }

double Configuration::mean_loss() const {
  double sum = 0;
  int n = 0;
  for (const auto& [seed, l] : seed_losses()) sum += l, ++n;
  return n ? sum / n : NAN;
}

double Configuration::loss_sd() const {
  const double mean = mean_loss();
  double ss = 0;
  int n = 0;
  for (const auto& [seed, l] : seed_losses()) ss += (l - mean) * (l - mean), ++n;
  return n >= 2 && std::isfinite(mean) ? std::sqrt(ss / (n - 1)) : NAN;
}

std::string replicate_key(const nlohmann::json& config) { return identity_keys(config).replicate; }

std::string baseline_key(const nlohmann::json& config) { return identity_keys(config).baseline; }

std::string compute_key(const nlohmann::json& config) {
  if (!config.is_object()) return "{}";
  std::string out;
  for (const char* key : {"model", "data", "world_size", "device", "threads", "cpu_affinity"})
    if (const auto at = config.find(key); at != config.end()) {
      append_text(out, key);
      append_scalar(out, *at);
    }
  if (const auto optimizer = config.find("optimizer"); optimizer != config.end() && optimizer->is_object())
    if (const auto name = optimizer->find("name"); name != optimizer->end()) {
      append_text(out, "optimizer");
      append_scalar(out, *name);
    }
  return out;
}

std::string timing_key(const nlohmann::json& config) { return identity_keys(config).timing; }

double t_quantile_95(int df) {
  static const double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                 2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return NAN;
  if (df <= 30) return table[df - 1];
  return 1.960 + 2.5 / df;
}

Evidence Evidence::gather(const db::Store& store, const std::vector<std::int64_t>& run_ids,
                          const EvidenceOptions& options) {
  return gather(store, store.runs(run_ids), options);
}

Evidence Evidence::gather(const db::Store& store, const std::vector<db::RunRecord>& runs,
                          const EvidenceOptions& options) {
  return gather(store, runs, nullptr, options);
}

Evidence Evidence::gather(const db::Store& store, std::vector<db::RunRecord>&& runs, const EvidenceOptions& options) {
  return gather(store, runs, &runs, options);
}

Evidence Evidence::gather(const db::Store& store, const std::vector<db::RunRecord>& runs,
                          std::vector<db::RunRecord>* movable, const EvidenceOptions& options) {
  Evidence e;
  e.options_ = options;
  // Runs are replicates when they differ only in seed and bookkeeping, ran
  // as many steps, on one host, over the same link: each run probes its
  // link as it starts, and a run behind a 100 Mbit/s shaper is no replicate
  // of one on the bare loopback.
  std::unordered_map<std::string, std::vector<std::size_t>> by_key;  // replicate key and steps: its configurations
  std::unordered_map<std::string, std::size_t> baseline_groups;      // baseline key and steps: its number
  std::unordered_map<std::string, HookActivity> activities;          // by the hook's key
  std::unordered_map<std::string, std::size_t> timing_numbers;       // timing key: its number
  std::vector<std::size_t> timing_group;                             // per configuration: its timing key's number
  // The profiles runs stored as they ended; a run without one (running,
  // older) is read from its steps.
  std::vector<std::string> stored;
  if (options.profiles) {
    std::vector<std::int64_t> ids;
    ids.reserve(runs.size());
    for (const auto& run : runs) ids.push_back(run.id);
    stored = store.stored_samples(ids);
  }
  // What each run says alone, read on every core a block at a time; then
  // the block's runs are grouped here, in order, with what only the store
  // can tell (a run that stored no profile or digest) read on this thread.
  // A block, not all 10^5 runs at once: their keys alone would take half a
  // gigabyte.
  constexpr std::size_t kBlock = 4096;
  std::vector<RunFacts> facts;
  std::vector<std::string> compute_keys;  // per configuration, from its first run
  for (std::size_t first = 0; first < runs.size(); first += kBlock) {
    const auto count = std::min(kBlock, runs.size() - first);
    facts.assign(count, {});
    db::parallel_for(count, [&](std::size_t k) {
      const auto i = first + k;
      if (!runs[i].config_problem.empty()) return;  // a bad row is no configuration
      facts[k] = run_facts(runs[i], options.profiles ? &stored[i] : nullptr);
    });
    for (std::size_t i = first; i < first + count; ++i) {
      const auto& run = runs[i];
      const auto id = run.id;
      auto& fact = facts[i - first];
      if (!run.config_problem.empty() || e.config_of_run_.count(id)) continue;
      if (options.profiles && !fact.samples && !fact.unreadable) {
        try {
          fact.samples = RunSamples::from_store(store, run);
        } catch (const db::Error& error) {
          fact.problem = error.what();
        }
      }
      if (!options.profiles) fact.problem = "its steps were not read (a comparison of losses)";
      const auto link = fact.samples ? fact.samples->link : fact.link ? *fact.link : run_link(store, run);
      auto& keys = fact.keys;
      auto& same = by_key[std::move(keys.replicate.append("|").append(std::to_string(run.steps_requested)))];
      std::optional<std::size_t> into;
      for (const auto c : same)
        if (!into && e.configurations_[c].host == run.host && net::same_link(e.configurations_[c].link, link)) into = c;
      if (!into) {
        Configuration c;
        c.hook = std::move(fact.hook);
        c.label = std::move(fact.label);
        c.plain_allreduce = fact.plain_allreduce;
        // Read through the hook's schema once per hook, not once per configuration.
        auto activity = activities.find(keys.hook);
        if (activity == activities.end()) activity = activities.emplace(keys.hook, hook_activity(run.config)).first;
        c.activity = activity->second;
        c.steps_requested = run.steps_requested;
        c.host = run.host;
        c.link = link;
        c.fingerprint_family = std::move(fact.fingerprint_family);
        if (options.configurations || options.profiles) {  // the run's last use of its configuration but the seed
          if (movable)
            c.config = std::move((*movable)[i].config);
          else
            c.config = run.config;
        }
        into = e.configurations_.size();
        e.configurations_.push_back(std::move(c));
        compute_keys.push_back(std::move(fact.compute));
        const auto group = baseline_groups.emplace(
            std::move(keys.baseline.append("|").append(std::to_string(run.steps_requested))), baseline_groups.size());
        e.baseline_group_.push_back(group.first->second);
        timing_group.push_back(timing_numbers.emplace(std::move(keys.timing), timing_numbers.size()).first->second);
        e.figures_.emplace_back();
        same.push_back(*into);
        // The same configuration measured apart: each says where.
        if (same.size() > 1)
          for (const auto k : same)
            e.configurations_[k].label = measured_where(e.configurations_[k], e.configurations_[same.front()]);
      }
      auto& c = e.configurations_[*into];
      c.runs.push_back(id);
      c.seeds.push_back(fact.seed);
      c.tail_losses.push_back(fact.digest ? fact.digest->loss : digest_run(store, run).loss);
      c.statuses.push_back(run.status);
      e.config_of_run_[id] = *into;
      auto& f = e.figures_[*into];
      if (fact.samples)
        f.samples.push_back(std::move(*fact.samples));
      else
        f.problem = fact.problem;
    }
  }
  std::vector<std::string>().swap(stored);

  // Each configuration's fair baseline, found once: the plain-allreduce
  // configuration with the same parameters outside the hook and the same
  // steps, the one with most succeeded runs (the first of equals).
  const auto succeeded = [](const Configuration& c) {
    return std::count(c.statuses.begin(), c.statuses.end(), std::string(db::status::kSucceeded));
  };
  baseline_groups = {};
  std::unordered_map<std::size_t, std::vector<std::size_t>> allreduce_by_group;
  for (std::size_t b = 0; b < e.configurations_.size(); ++b)
    if (e.configurations_[b].plain_allreduce) allreduce_by_group[e.baseline_group_[b]].push_back(b);
  // ... measured where the configuration was: on its host, over its link.
  for (std::size_t c = 0; c < e.configurations_.size(); ++c) {
    const auto& config = e.configurations_[c];
    const auto at = allreduce_by_group.find(e.baseline_group_[c]);
    std::optional<std::size_t> best;
    std::string problem;  // why an allreduce configuration of the same group is not its baseline
    if (at != allreduce_by_group.end())
      for (const auto b : at->second) {
        const auto& base = e.configurations_[b];
        if (base.host != config.host) {
          if (problem.empty())
            problem = "the allreduce run with the same parameters outside the hook (run " +
                      std::to_string(base.runs.front()) + ") ran on another host (" + base.host + ", not " +
                      config.host + ")";
          continue;
        }
        if (!net::same_link(base.link, config.link)) {
          if (problem.empty())
            problem = "the allreduce run with the same parameters outside the hook (run " +
                      std::to_string(base.runs.front()) + ") probed another link: " +
                      net::describe_link_difference(base.link, config.link) +
                      "; a time on one link predicts nothing on the other (run both again side by side)";
          continue;
        }
        if (!best || succeeded(base) > succeeded(e.configurations_[*best])) best = b;
      }
    if (!best && problem.empty())
      problem =
          "no allreduce run with the same parameters outside the hook to compare with (a sweep with a baseline adds "
          "one at every value it sweeps)";
    e.baseline_of_.push_back(best);
    e.baseline_problem_.push_back(best ? std::string() : std::move(problem));
  }

  // Pools of compute, by model, data, ranks and optimizer kind.
  std::map<std::string, std::size_t> pool_of;
  for (std::size_t c = 0; c < e.configurations_.size(); ++c) {
    auto& f = e.figures_[c];
    if (!f.problem.empty()) f.samples.clear();
    if (f.samples.empty()) {
      if (f.problem.empty()) f.problem = "it has no stored steps";
      continue;
    }
    auto& key = compute_keys[c];
    auto at = pool_of.find(key);  // found, mostly: a node is made only for a new pool
    if (at == pool_of.end()) {
      at = pool_of.emplace(std::move(key), e.pools_.size()).first;
      e.pools_.emplace_back();
    }
    f.pool = at->second;
    for (std::size_t r = 0; r < f.samples.size(); ++r) e.pools_[f.pool].members.push_back({c, r});
  }
  const int replicates = std::max(0, options.replicates);
  for (std::size_t p = 0; p < e.pools_.size(); ++p) {
    auto& pool = e.pools_[p];
    // The members' compute steps one after another, each member's from `first`.
    std::array<std::vector<double>, 4> steps;
    std::vector<std::size_t> first, size;
    for (const auto& [c, r] : pool.members) {
      const auto& s = e.figures_[c].samples[r];
      first.push_back(steps[0].size());
      size.push_back(s.size());
      const std::array<const std::vector<double>*, 4> series{&s.data, &s.forward, &s.pure_backward, &s.optimizer};
      for (std::size_t k = 0; k < 4; ++k) steps[k].insert(steps[k].end(), series[k]->begin(), series[k]->end());
    }
    pool.steps = steps[0].size();
    // Each series' steps in increasing order, found once: a replicate's
    // medians are read off how often it picked each step, walked in that
    // order, instead of gathering and partitioning its picks (a pool of
    // 10^5 runs picks 10^5 steps and more in each of its replicates).
    const auto by_value = [](double a, double b) { return a < b || (!std::isnan(a) && std::isnan(b)); };
    std::array<std::vector<std::size_t>, 4> order;
    const auto on_every_core = [&](std::size_t count, const std::function<void(std::size_t)>& work) {
      if (pool.steps > 100000)
        db::parallel_for(count, work, /*chunk=*/1);
      else
        for (std::size_t k = 0; k < count; ++k) work(k);
    };
    on_every_core(4, [&](std::size_t k) {
      order[k].resize(pool.steps);
      std::iota(order[k].begin(), order[k].end(), std::size_t{0});
      std::stable_sort(order[k].begin(), order[k].end(),
                       [&](std::size_t a, std::size_t b) { return by_value(steps[k][a], steps[k][b]); });
    });
    // median() of the picks (`counts`: how often each step was picked): the
    // value at rank total / 2, with the one below it for an even total.
    const auto medians = [&](const std::vector<std::uint32_t>& counts, std::size_t total) {
      std::array<double, 4> out{};
      for (std::size_t k = 0; k < 4; ++k) {
        const std::size_t mid = total / 2;
        double below = NAN, at = NAN;
        std::size_t seen = 0;  // picks of smaller values
        for (const auto i : order[k]) {
          const std::size_t n = counts[i];
          if (mid >= 1 && seen <= mid - 1 && mid - 1 < seen + n) below = steps[k][i];
          if (seen <= mid && mid < seen + n) {
            at = steps[k][i];
            break;
          }
          seen += n;
        }
        out[k] = total % 2 ? at : 0.5 * (at + below);
      }
      return out;
    };
    pool.point = medians(std::vector<std::uint32_t>(pool.steps, 1), pool.steps);
    // Members picked with replacement, and each one's steps with replacement;
    // each replicate from its own stream, so that they are drawn on every
    // core, and a fast one (FastDraw).
    pool.replicates.resize(static_cast<std::size_t>(replicates));
    on_every_core(pool.replicates.size(), [&](std::size_t r) {
      FastDraw draw(replicate_seed(options.seed, p, r));
      std::vector<std::uint32_t> counts(pool.steps, 0);
      std::size_t total = 0;
      for (std::size_t k = 0; k < size.size(); ++k) {
        const auto m = draw.index(size.size());
        for (std::size_t i = 0; i < size[m]; ++i) ++counts[first[m] + draw.index(size[m])];
        total += size[m];
      }
      pool.replicates[r] = medians(counts, total);
    });
  }

  // Timing replicates: configurations alike but for seed and learning
  // rate, measured on one host and link (a shaped run is no repeat).
  timing_numbers = {};
  std::map<std::pair<std::size_t, std::string>, std::vector<std::pair<net::LinkProbe, std::vector<double>>>>
      timing_groups;  // by timing key's number and host
  for (std::size_t c = 0; c < e.configurations_.size(); ++c) {
    auto& f = e.figures_[c];
    if (f.samples.empty()) continue;
    const auto& pool = e.pools_[f.pool];
    // A run that trained while the machine was slower (or faster) measured
    // its hook's work and collectives at that speed too: brought to the
    // pool's by the ratio of the pool's compute to its own.
    for (auto& s : f.samples) {
      std::vector<double> own;
      for (std::size_t i = 0; i < s.size(); ++i) own.push_back(s.forward[i] + s.pure_backward[i]);
      const double mine = median(std::move(own));
      const double factor = mine > 0 ? (pool.point[1] + pool.point[2]) / mine : 1.0;
      if (mine > 0) s.scale_hook_times(factor);
      const double outside = factor * time_outside_compute(s);
      if (outside <= 0) continue;
      const auto& config = e.configurations_[c];
      auto& groups = timing_groups[{timing_group[c], config.host}];
      auto group = std::find_if(groups.begin(), groups.end(),
                                [&](const auto& g) { return net::same_link(g.first, config.link); });
      if (group == groups.end()) group = groups.insert(groups.end(), {config.link, {}});
      group->second.push_back(std::log(outside));
    }
  }
  std::map<std::string, std::vector<double>> log_outside;
  for (const auto& [key, groups] : timing_groups)
    for (std::size_t g = 0; g < groups.size(); ++g)
      log_outside[std::to_string(key.first) + "|" + key.second + "#" + std::to_string(g)] = groups[g].second;
  e.run_to_run_ = RunToRun::from_groups(log_outside);

  // Each configuration's point; its replicates are drawn when an interval is asked for (replicate_profiles).
  e.drawn_.resize(e.configurations_.size());
  for (auto& slot : e.drawn_) slot = std::make_unique<Drawn>();
  for (std::size_t c = 0; c < e.configurations_.size(); ++c) {
    auto& f = e.figures_[c];
    if (f.samples.empty()) continue;
    std::vector<std::size_t> offsets;
    f.point = with_compute((f.samples.size() == 1 ? f.samples.front() : concatenate(f.samples, offsets)).profile(),
                           e.pools_[f.pool].point);
    f.point.run_id = e.configurations_[c].runs.front();
  }
  return e;
}

std::optional<std::size_t> Evidence::configuration_of(std::int64_t run_id) const {
  const auto at = config_of_run_.find(run_id);
  if (at == config_of_run_.end()) return std::nullopt;
  return at->second;
}

std::optional<std::size_t> Evidence::baseline_of(std::size_t config) const { return baseline_of_.at(config); }

const std::string& Evidence::baseline_problem(std::size_t config) const { return baseline_problem_.at(config); }

std::string Evidence::differences_outside_hook(std::size_t a, std::size_t b) const {
  if (baseline_group_.at(a) == baseline_group_.at(b)) return "";  // alike outside the hook, by their keys
  std::map<std::string, std::string> fa, fb;
  flatten_outside_hook(configurations_.at(a).config, "", fa);
  flatten_outside_hook(configurations_.at(b).config, "", fb);
  std::string out;
  std::set<std::string> keys;
  for (const auto& [k, v] : fa) keys.insert(k);
  for (const auto& [k, v] : fb) keys.insert(k);
  for (const auto& k : keys) {
    const auto va = fa.count(k) ? fa[k] : "(unset)", vb = fb.count(k) ? fb[k] : "(unset)";
    if (va != vb) out += (out.empty() ? "" : ", ") + k + " " + va + " vs " + vb;
  }
  return out;
}

const std::string& Evidence::profile_problem(std::size_t config) const { return figures_.at(config).problem; }

const RunProfile& Evidence::profile(std::size_t config) const { return figures_.at(config).point; }

std::string Evidence::compute_source(std::size_t config) const {
  const auto& f = figures_.at(config);
  if (f.samples.empty()) return "";
  const auto& pool = pools_[f.pool];
  char text[200];
  std::snprintf(text, sizeof text, "pooled over the %zu run%s of this model, data and ranks (median of %zu steps)",
                pool.members.size(), pool.members.size() == 1 ? "" : "s", pool.steps);
  return text;
}

const std::vector<RunProfile>& Evidence::replicate_profiles(std::size_t config) const {
  auto& drawn = *drawn_.at(config);
  std::call_once(drawn.once, [&] { drawn.profiles = draw_replicates(config); });
  return drawn.profiles;
}

std::vector<RunProfile> Evidence::draw_replicates(std::size_t config) const {
  const auto& f = figures_.at(config);
  std::vector<RunProfile> out;
  if (f.samples.empty()) return out;
  const auto& pool = pools_[f.pool];
  std::vector<std::size_t> sizes, offsets{0};
  for (const auto& s : f.samples) sizes.push_back(s.size());
  const bool one_run = f.samples.size() == 1;
  const auto concatenated = one_run ? RunSamples() : concatenate(f.samples, offsets);
  const auto& steps = one_run ? f.samples.front() : concatenated;
  Draw draw(options_.seed * 1000003u + 104729u * config + 2);
  // One run shows its steps' noise, not the next run's: its time outside
  // compute is drawn from the run-to-run spread (on its own stream, so the
  // steps drawn stay those of every other configuration's replicates).
  Draw next_run(options_.seed * 1000003u + 15485863u * config + 3);
  for (std::size_t r = 0; r < pool.replicates.size(); ++r) {
    auto replicate = steps.profile(two_level_picks(draw, offsets, sizes));
    if (one_run) replicate.scale_hook_times(std::exp(run_to_run_.log_sd * next_run.normal()));
    out.push_back(with_compute(std::move(replicate), pool.replicates[r]));
  }
  return out;
}

Estimate Evidence::predicted_step_s(std::size_t config, const net::Cluster& cluster, const TargetCompute& compute,
                                    Interval interval) const {
  const auto& f = figures_.at(config);
  if (f.samples.empty()) return {};
  std::vector<double> replicates;
  if (interval == Interval::Drawn)
    for (const auto& p : replicate_profiles(config))
      replicates.push_back(predict(on_target(p, compute), cluster).step_s);
  return from_replicates(predict(on_target(f.point, compute), cluster).step_s, replicates);
}

Estimate Evidence::speedup(std::size_t config, std::size_t baseline, const net::Cluster& cluster,
                           const TargetCompute& compute, Interval interval) const {
  const auto& f = figures_.at(config);
  const auto& b = figures_.at(baseline);
  if (f.samples.empty() || b.samples.empty()) return {};
  const auto ratio = [&](const RunProfile& base, const RunProfile& own) {
    return predict(on_target(base, compute), cluster).step_s / predict(on_target(own, compute), cluster).step_s;
  };
  std::vector<double> replicates;
  if (interval == Interval::Drawn) {
    const auto& own = replicate_profiles(config);
    const auto& base = replicate_profiles(baseline);
    for (std::size_t r = 0; r < std::min(own.size(), base.size()); ++r) replicates.push_back(ratio(base[r], own[r]));
  }
  return from_replicates(ratio(b.point, f.point), replicates);
}

LossChange Evidence::loss_change(std::size_t config, std::size_t baseline) const {
  const auto& c = configurations_.at(config);
  const auto& b = configurations_.at(baseline);
  LossChange out;
  std::vector<double> differences, base_losses;
  bool nonfinite = false;
  const auto own = c.seed_losses(), base = b.seed_losses();
  for (const auto& [seed, loss] : own) {  // a pair per seed both ran, however often
    const auto paired = base.find(seed);
    if (paired == base.end()) continue;
    if (!std::isfinite(loss)) nonfinite = true;
    differences.push_back(loss - paired->second);
    base_losses.push_back(paired->second);
  }
  if (nonfinite) {
    out.change.value = INFINITY;
    out.pairs = static_cast<int>(differences.size());
    return out;
  }
  const auto mean_of = [](const std::vector<double>& v) -> double {
    return v.empty() ? NAN : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  const auto sd_of = [&](const std::vector<double>& v) -> double {
    if (v.size() < 2) return NAN;
    const double m = mean_of(v);
    double ss = 0;
    for (const double x : v) ss += (x - m) * (x - m);
    return std::sqrt(ss / static_cast<double>(v.size() - 1));
  };
  if (!differences.empty()) {
    const double scale = std::fabs(mean_of(base_losses));
    if (!(scale > 0)) return out;
    out.pairs = static_cast<int>(differences.size());
    out.change.value = mean_of(differences) / scale;
    if (differences.size() >= 2) {
      const double half = t_quantile_95(out.pairs - 1) * sd_of(differences) / std::sqrt(double(out.pairs)) / scale;
      out.change.low = out.change.value - half;
      out.change.high = out.change.value + half;
    }
    return out;
  }
  // No seed in common: the means, with Welch's interval when both have a spread.
  std::vector<double> lc, lb;
  for (const auto& [seed, l] : own) lc.push_back(l);
  for (const auto& [seed, l] : base) lb.push_back(l);
  if (lc.empty() || lb.empty()) return out;
  for (const double l : lc)
    if (!std::isfinite(l)) {
      out.change.value = INFINITY;
      return out;
    }
  const double scale = std::fabs(mean_of(lb));
  if (!(scale > 0)) return out;
  out.change.value = (mean_of(lc) - mean_of(lb)) / scale;
  if (lc.size() >= 2 && lb.size() >= 2) {
    const double vc = sd_of(lc) * sd_of(lc) / lc.size(), vb = sd_of(lb) * sd_of(lb) / lb.size();
    const double df = (vc + vb) * (vc + vb) /
                      (vc * vc / static_cast<double>(lc.size() - 1) + vb * vb / static_cast<double>(lb.size() - 1));
    const double half = t_quantile_95(std::max(1, static_cast<int>(std::floor(df)))) * std::sqrt(vc + vb) / scale;
    out.change.low = out.change.value - half;
    out.change.high = out.change.value + half;
  }
  return out;
}

double Evidence::wire_bytes_per_step(std::size_t config) const {
  const auto& f = figures_.at(config);
  double sum = 0;
  std::size_t n = 0;
  for (const auto& s : f.samples)
    for (const double b : s.wire_bytes) sum += b, ++n;
  return n ? sum / static_cast<double>(n) : NAN;
}

std::pair<std::int64_t, std::int64_t> Evidence::steady_steps(std::size_t config) const {
  const auto& f = figures_.at(config);
  std::int64_t first = -1, last = -1;
  for (const auto& s : f.samples) {
    if (s.steps.empty()) continue;
    first = first < 0 ? s.steps.front() : std::min(first, s.steps.front());
    last = std::max(last, s.steps.back());
  }
  return {first, last};
}

std::string Evidence::inactive_reason(std::size_t config, std::optional<std::size_t> baseline) const {
  const auto& c = configurations_.at(config);
  if (c.plain_allreduce || figures_.at(config).samples.empty()) return "";
  const auto [first, last] = steady_steps(config);
  char text[400];
  const auto& activity = c.activity;
  if (activity.first_active_step > first) {
    std::snprintf(text, sizeof text,
                  "its hook switches on at step %lld (%s), after the first of the steps its figures come from "
                  "(%lld-%lld): run at least %lld steps",
                  static_cast<long long>(activity.first_active_step), activity.start_field.c_str(),
                  static_cast<long long>(first), static_cast<long long>(last),
                  static_cast<long long>(2 * activity.first_active_step));
    return text;
  }
  if (!baseline) return "";
  const double own = wire_bytes_per_step(config), base = wire_bytes_per_step(*baseline);
  if (std::isfinite(own) && std::isfinite(base) && base > 0 && own >= 0.98 * base) {
    std::snprintf(text, sizeof text,
                  "it did not compress in the steps its figures come from (%lld-%lld): %.3f MB per step, allreduce "
                  "%.3f",
                  static_cast<long long>(first), static_cast<long long>(last), own / 1e6, base / 1e6);
    return text;
  }
  return "";
}

}  // namespace commtune

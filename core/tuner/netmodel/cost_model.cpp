#include "core/tuner/netmodel/cost_model.h"

#include <algorithm>
#include <cstdio>

namespace commtune {

double RunProfile::collective_bytes() const {
  double sum = 0;
  for (const auto& b : buckets)
    for (const auto& c : b.collectives) sum += c.bytes;
  for (const auto& c : step_collectives) sum += c.bytes;
  return sum;
}

void RunProfile::scale_hook_times(double factor) {
  hook_s *= factor;
  hook_inline_s *= factor;
  for (auto& b : buckets) {
    b.chain_s *= factor;
    b.work_s *= factor;
    for (auto& c : b.collectives) c.local_s *= factor;
  }
  for (auto& c : step_collectives) c.local_s *= factor;
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
                            {"chain_s", b.chain_s},
                            {"work_s", b.work_s},
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
          {"serial_hook", serial_hook},
          {"link_bytes_per_s", link_bytes_per_s},
          {"buckets", buckets_json},
          {"step_collectives", uses(step_collectives)}};
}

nlohmann::json StepPrediction::to_json() const {
  return {{"step_s", step_s}, {"compute_s", compute_s}, {"communication_s", communication_s}, {"exposed_s", exposed_s}};
}

StepPrediction predict(const RunProfile& p, const net::Cluster& cluster) {
  // This machine's link as the run measured it (no latency: the software
  // around each call stays, whatever the network).
  net::Cluster here;
  here.nodes = std::max(1, p.world_size);
  here.inter = here.intra = {"here", p.link_bytes_per_s, 0, ""};
  // The collectives' transfers over the target's link (`link`), over this
  // machine's (`here`), and what they took here beyond that (`rest`: the
  // reduction, casts, software, waiting for a core).
  struct Time {
    double link = 0, here = 0, rest = 0;
  };
  const auto time_of = [&](const std::vector<CollectiveUse>& uses) {
    Time t;
    for (const auto& c : uses) {
      if (c.calls <= 0) continue;
      const double per_call = c.bytes / c.calls;
      t.link += c.calls * net::collective_time(c.kind, per_call, cluster, c.group);
      const double here_s =
          p.link_bytes_per_s > 0 ? std::min(c.local_s, c.calls * net::collective_time(c.kind, per_call, here, c.group))
                                 : 0.0;
      t.here += here_s;
      t.rest += c.local_s - here_s;
    }
    return t;
  };
  const double off_thread_hook = std::max(0.0, p.hook_s - p.hook_inline_s);
  double total_bytes = 0;
  for (const auto& b : p.buckets) total_bytes += b.fp32_bytes;

  StepPrediction out;
  double link_free = 0, chain_free = 0;
  // After backward the optimizer updates each bucket's parameters once its
  // chain has ended, bucket by bucket (its share of the optimizer's time by
  // size), so the updates overlap the later buckets' communication.
  double updated = p.backward_s;
  for (const auto& b : p.buckets) {
    const auto t = time_of(b.collectives);
    out.communication_s += t.link;
    const double ready = std::min(b.ready_s, p.backward_s);
    double end = 0;
    if (!b.measured_chain) {
      // An older run: hook work off the backward thread shared out by bucket
      // size; a collective takes its transfer there or its time here, the longer.
      const double share = total_bytes > 0 ? b.fp32_bytes / total_bytes : 1.0 / static_cast<double>(p.buckets.size());
      const double start = ready + off_thread_hook * share;
      link_free = std::max(link_free, start) + t.link;
      end = std::max(link_free, start + t.here + t.rest);
    } else if (p.serial_hook) {
      // One hook thread, one bucket after another: its chain as here (less
      // the transfer time a faster link saves), and never shorter than its
      // own work and the transfers there back to back. (Its work overlaps
      // the transfers of the collectives it does not wait on at once, such
      // as PowerSGD's uncompressed allreduce under P = MQ; Gloo pipelines
      // its reductions with the transfer.)
      const double start = std::max(ready, chain_free);
      end = start + std::max(b.chain_s - std::max(0.0, t.here - t.link), b.work_s + t.link);
      chain_free = end;
    } else {
      // Collectives issued as buckets become ready, after the hook's inline
      // work; the link carries one at a time, and each collective's
      // reduction comes on top of its transfer (a ring of two cannot overlap
      // them: each rank reduces what it received before sending it back);
      // never shorter than its chain as here, less what a faster link saves.
      link_free = std::max(link_free, ready + b.work_s) + t.link;
      end = std::max(ready + b.chain_s - std::max(0.0, t.here - t.link), link_free + t.rest);
    }
    const double share = total_bytes > 0 ? b.fp32_bytes / total_bytes : 1.0 / static_cast<double>(p.buckets.size());
    updated = std::max(updated, end) + p.optimizer_s * share;
  }
  if (p.buckets.empty()) updated += p.optimizer_s;
  const auto outside = time_of(p.step_collectives);
  out.communication_s += outside.link;
  out.compute_s = p.data_s + p.forward_s + p.backward_s + p.optimizer_s;
  out.exposed_s = std::max(0.0, updated - p.backward_s - p.optimizer_s) +
                  std::max(outside.link, outside.here + outside.rest);
  out.step_s = out.compute_s + out.exposed_s;
  return out;
}

std::string TargetCompute::describe() const {
  char text[200];
  switch (kind) {
    case Kind::Measured:
      return "compute: this machine's, pooled over the runs of each model";
    case Kind::Scaled:
      std::snprintf(text, sizeof text, "compute: this machine's, pooled over the runs of each model, x %g", scale);
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
    b.chain_s *= scale;
    b.work_s *= scale;
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

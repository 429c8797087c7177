#include "core/tuner/netmodel/network.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/tuner/schema/param_schema.h"

namespace commtune::net {

namespace {

constexpr double kGbit = 1e9 / 8;  // bytes per second in one Gbit/s

}  // namespace

const std::vector<Link>& link_presets() {
  // Nominal line rates; latencies of a message hop through the usual stack
  // (TCP for Ethernet, RDMA for 100 Gbit/s, NVLink within a node).
  static const std::vector<Link> presets = {
      {"100mbit", 0.1 * kGbit, 100e-6, "100 Mbit/s Ethernet"},
      {"1gbit", 1 * kGbit, 50e-6, "1 Gbit/s Ethernet"},
      {"10gbit", 10 * kGbit, 20e-6, "10 Gbit/s Ethernet"},
      {"25gbit", 25 * kGbit, 10e-6, "25 Gbit/s Ethernet"},
      {"100gbit", 100 * kGbit, 3e-6, "100 Gbit/s InfiniBand/RoCE"},
      {"nvlink", 150e9, 2e-6, "NVLink within a node (150 GB/s per direction, as NCCL reaches on A100/H100)"},
  };
  return presets;
}

const Link& link_preset(std::string_view name, const std::string& field) {
  std::vector<std::string> names;
  for (const auto& link : link_presets()) {
    if (link.name == name) return link;
    names.push_back(link.name);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  const auto hint = closest_name(name, names);
  throw ConfigError(field, "unknown network '" + std::string(name) + "'" +
                               (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + ": one of " + list);
}

Link custom_link(double bandwidth_gbit_s, double latency_us) {
  char name[64];
  std::snprintf(name, sizeof name, "%gGbit/%gus", bandwidth_gbit_s, latency_us);
  return {name, bandwidth_gbit_s * kGbit, latency_us * 1e-6, "custom link"};
}

Cluster Cluster::of(const Link& inter, int world_size, int ranks_per_node, int nodes, const Link& intra) {
  Cluster c;
  c.gpus_per_node = ranks_per_node;
  c.nodes = nodes > 0 ? nodes : std::max(1, world_size / ranks_per_node);
  c.inter = inter;
  c.intra = intra;
  return c;
}

std::string Cluster::describe() const {
  std::string text = std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") + " x " + std::to_string(gpus_per_node) +
                     (gpus_per_node == 1 ? " rank" : " ranks");
  if (nodes > 1) text += ", " + inter.name + " between nodes";
  if (gpus_per_node > 1) text += ", " + intra.name + " within a node";
  if (nodes == 1 && gpus_per_node == 1) text += " (no communication)";
  return text;
}

const char* to_string(Collective kind) {
  switch (kind) {
    case Collective::Allreduce:
      return "allreduce";
    case Collective::Allgather:
      return "allgather";
    case Collective::Alltoall:
      return "alltoall";
    case Collective::Broadcast:
      return "broadcast";
    case Collective::Reduce:
      return "reduce";
    case Collective::SendRecv:
      return "sendrecv";
    case Collective::PushPull:
      return "pushpull";
  }
  return "?";
}

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> kinds = {Collective::Allreduce, Collective::Allgather, Collective::Alltoall,
                                                Collective::Broadcast, Collective::Reduce,    Collective::SendRecv,
                                                Collective::PushPull};
  return kinds;
}

namespace {
double ring_time(Collective kind, double bytes, double p, const Link& link) {
  if (p <= 1) return 0;
  const double a = link.latency_s, n_over_b = bytes / link.bandwidth_bytes_per_s;
  switch (kind) {
    case Collective::Allreduce:
      return 2 * (p - 1) * a + 2 * (p - 1) / p * n_over_b;
    case Collective::Allgather:
      return (p - 1) * a + (p - 1) * n_over_b;
    case Collective::Alltoall:
      return (p - 1) * a + (p - 1) / p * n_over_b;
    case Collective::Broadcast:
    case Collective::Reduce:
      return (p - 1) * a + n_over_b;
    case Collective::SendRecv:
      return a + n_over_b;
    case Collective::PushPull:
      return 2 * a + n_over_b;
  }
  return 0;
}
}  // namespace

double collective_time(Collective kind, double bytes, const Cluster& cluster) {
  return ring_time(kind, bytes, cluster.ranks(), cluster.bottleneck());
}

double probed_bandwidth(double small_bytes, double small_s, double large_bytes, double large_s, int ranks) {
  if (ranks < 2 || !(large_bytes > small_bytes) || !(large_s > small_s) || !std::isfinite(large_s)) return 0;
  const double p = ranks;
  return 2 * (p - 1) / p * (large_bytes - small_bytes) / (large_s - small_s);
}

namespace {
constexpr double kOneLinkFactor = 8;  // how far apart two probes of one link may be
double lowest(const LinkProbe& link) { return link.bytes_per_s / std::max(1.0, link.slower); }
double highest(const LinkProbe& link) { return link.bytes_per_s * std::max(1.0, link.faster); }
}  // namespace

bool same_link(const LinkProbe& a, const LinkProbe& b) {
  if (a.bytes_per_s <= 0 || b.bytes_per_s <= 0) return true;
  return lowest(a) <= kOneLinkFactor * highest(b) && lowest(b) <= kOneLinkFactor * highest(a);
}

std::string describe_link_difference(const LinkProbe& a, const LinkProbe& b) {
  const auto bounds = [](const LinkProbe& link) {
    char text[80];
    if (link.faster >= kUnbounded)
      std::snprintf(text, sizeof text, "%.3g GB/s (its attempts: %.3g or more)", link.bytes_per_s / 1e9,
                    lowest(link) / 1e9);
    else
      std::snprintf(text, sizeof text, "%.3g GB/s (its attempts: %.3g-%.3g)", link.bytes_per_s / 1e9,
                    lowest(link) / 1e9, highest(link) / 1e9);
    return std::string(text);
  };
  return bounds(a) + " against " + bounds(b) + ", bounds more than the x8 two probes of one link may differ by apart";
}

std::string collective_stat_prefix(Collective kind, const Group& group) {
  std::string prefix = std::string("comm.") + to_string(kind);
  if (!group.whole()) prefix += "@" + std::to_string(group.size) + "x" + std::to_string(group.stride);
  return prefix;
}

std::optional<CollectiveStat> parse_collective_stat(std::string_view name, std::string_view suffix) {
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix ||
      name.substr(0, 5) != "comm.")
    return std::nullopt;
  const auto body = name.substr(5, name.size() - 5 - suffix.size());
  const auto at = body.find('@');
  for (const auto kind : all_collectives()) {
    if (body.substr(0, at) != to_string(kind)) continue;
    CollectiveStat stat{kind, {}};
    if (at != std::string_view::npos &&
        std::sscanf(std::string(body.substr(at + 1)).c_str(), "%dx%d", &stat.group.size, &stat.group.stride) != 2)
      return std::nullopt;
    return stat;
  }
  return std::nullopt;
}

double collective_time(Collective kind, double bytes, const Cluster& cluster, const Group& group) {
  if (group.whole()) return collective_time(kind, bytes, cluster);
  const bool one_node = cluster.nodes == 1 || group.stride * (group.size - 1) < cluster.gpus_per_node;
  return ring_time(kind, bytes, group.size, one_node ? cluster.intra : cluster.inter);
}

}  // namespace commtune::net

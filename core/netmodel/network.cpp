#include "core/netmodel/network.h"

#include <cstdio>

#include "core/schema/param_schema.h"

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
  }
  return "?";
}

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> kinds = {Collective::Allreduce, Collective::Allgather, Collective::Alltoall,
                                                Collective::Broadcast, Collective::Reduce,    Collective::SendRecv};
  return kinds;
}

double collective_time(Collective kind, double bytes, const Cluster& cluster) {
  const double p = cluster.ranks();
  if (p <= 1) return 0;
  const auto& link = cluster.bottleneck();
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
  }
  return 0;
}

}  // namespace commtune::net

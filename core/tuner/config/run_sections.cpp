#include "core/tuner/config/run_sections.h"

namespace commtune {

Schema<ReducerOptions> ReducerOptions::schema() {
  return Schema<ReducerOptions>()
      .real("bucket_cap_mb", &ReducerOptions::bucket_cap_mb, Range::above(0), "MiB",
            "gradient bucket size limit (DDP's bucket_cap_mb)", true)
      .real("first_bucket_cap_mb", &ReducerOptions::first_bucket_cap_mb, Range::at_least(0), "MiB",
            "size limit of the first bucket once buckets are rebuilt; 0: as PyTorch 2.x's DDP, 1 MiB with the "
            "default bucket_cap_mb (25), else bucket_cap_mb", true)
      .flag("rebuild_buckets", &ReducerOptions::rebuild_buckets,
            "as DDP: step 0 reduces one bucket in parameter order, then buckets are rebuilt in the order gradients "
            "became ready; off: fixed buckets over the parameters in reverse order");
}

double ReducerOptions::first_bucket_cap() const {
  if (first_bucket_cap_mb > 0) return first_bucket_cap_mb;
  return bucket_cap_mb == kDefaultBucketCapMb ? 1.0 : bucket_cap_mb;
}

Schema<NetworkOptions> NetworkOptions::schema() {
  std::vector<std::string> choices = {"none", "custom"};
  for (const auto& link : net::link_presets()) choices.push_back(link.name);
  return Schema<NetworkOptions>()
      .choice("emulate", &NetworkOptions::emulate, choices,
              "delay every collective to what it would take on this network (a preset, or custom: bandwidth_gbit_s "
              "and latency_us); none runs at local speed")
      .real("bandwidth_gbit_s", &NetworkOptions::bandwidth_gbit_s, Range::above(0), "Gbit/s",
            "bandwidth of the custom network", true)
      .real("latency_us", &NetworkOptions::latency_us, Range::at_least(0), "us", "latency of the custom network")
      .integer("ranks_per_node", &NetworkOptions::ranks_per_node, {1, 4096}, "ranks",
               "ranks that share a node in the emulated cluster (1: every rank on its own node, all traffic over the "
               "emulated network)");
}

std::optional<net::Cluster> NetworkOptions::emulated_cluster(int world_size) const {
  if (emulate == "none") return std::nullopt;
  if (world_size % ranks_per_node != 0)
    throw ConfigError("network.ranks_per_node", "must divide the world size " + std::to_string(world_size) + ", got " +
                                                    std::to_string(ranks_per_node));
  const auto link = emulate == "custom" ? net::custom_link(bandwidth_gbit_s, latency_us)
                                        : net::link_preset(emulate, "network.emulate");
  net::Cluster cluster;
  cluster.nodes = world_size / static_cast<int>(ranks_per_node);
  cluster.gpus_per_node = static_cast<int>(ranks_per_node);
  cluster.inter = link;
  cluster.intra = link;  // with one node, the emulated network is the one between its ranks
  return cluster;
}

Schema<CheckpointOptions> CheckpointOptions::schema() {
  return Schema<CheckpointOptions>()
      .text("dir", &CheckpointOptions::dir,
            "write checkpoints under this folder (step-NNNNNN/rank-R.pt), and one after the last step")
      .integer("every", &CheckpointOptions::every, Range::at_least(0), "steps",
               "also checkpoint every N steps (0: only after the last step)")
      .text("resume", &CheckpointOptions::resume,
            "continue from this checkpoint folder (a step-NNNNNN folder written with the same world size)");
}

}  // namespace commtune

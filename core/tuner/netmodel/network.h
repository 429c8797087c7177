// Networks and how long a collective takes on them: the latency-bandwidth
// (alpha-beta) model of ring collectives that both the step-time predictor
// and the link emulator use. docs/network-model.md states it and its limits.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace commtune::net {

struct Link {
  std::string name;
  double bandwidth_bytes_per_s = 0;  // per direction, what a collective can use
  double latency_s = 0;              // per message hop
  std::string doc;
};

// 100mbit, 1gbit, 10gbit, 25gbit, 100gbit (Ethernet/InfiniBand between
// nodes) and nvlink (between GPUs of one node).
const std::vector<Link>& link_presets();
// A preset by name; throws ConfigError naming `field` and the presets.
const Link& link_preset(std::string_view name, const std::string& field);
Link custom_link(double bandwidth_gbit_s, double latency_us);

struct Cluster {
  int nodes = 1;
  int gpus_per_node = 1;
  Link inter;  // between nodes
  Link intra;  // between ranks of one node

  int ranks() const { return nodes * gpus_per_node; }
  // A ring over every rank crosses the inter-node link when there is more
  // than one node, and that link sets the pace.
  const Link& bottleneck() const { return nodes > 1 ? inter : intra; }
  std::string describe() const;
  // The link a collective of all ranks is limited by: between nodes when
  // there are several, else inside the one ("10gbit", "nvlink").
  const std::string& network_name() const { return nodes > 1 ? inter.name : intra.name; }

  // The target a prediction asks about: `world_size` ranks, `ranks_per_node`
  // to a node, on `nodes` nodes when given (0: as many as the ranks need),
  // `inter` between them and `intra` inside one. The CLI's what-if commands
  // and the Analysis page shape their targets here.
  static Cluster of(const Link& inter, int world_size, int ranks_per_node = 1, int nodes = 0,
                    const Link& intra = link_preset("nvlink", "intra"));
};

enum class Collective { Allreduce, Allgather, Alltoall, Broadcast, Reduce, SendRecv, PushPull };
const char* to_string(Collective kind);
const std::vector<Collective>& all_collectives();

// Seconds for one collective in which every rank contributes `bytes`
// (allreduce, allgather, alltoall: its input; broadcast, reduce: the root's buffer):
//   allreduce  2(p-1) a + 2(p-1)/p n/B     (ring: reduce-scatter + allgather)
//   allgather   (p-1) a +  (p-1)   n/B
//   alltoall    (p-1) a +  (p-1)/p n/B
//   broadcast   (p-1) a +          n/B     (pipelined ring)
//   reduce      (p-1) a +          n/B     (pipelined ring, towards the root)
//   sendrecv          a +          n/B     (one message out and one in, at once)
//   pushpull         2a +          n/B     (BytePS: a worker's push to the servers, then its pull;
//                                           n = push + pull; servers' links not the bottleneck)
// with p ranks, and a, B the bottleneck link's latency and bandwidth.
double collective_time(Collective kind, double bytes, const Cluster& cluster);

// The ranks a collective runs among: `size` ranks `stride` apart, as a
// subgroup from Communicator::split (ranks of one node: stride 1; the node
// leaders: stride ranks-per-node). size 0: every rank of the job.
struct Group {
  int size = 0;
  int stride = 1;
  bool whole() const { return size == 0; }
  bool operator<(const Group& o) const { return size != o.size ? size < o.size : stride < o.stride; }
  bool operator==(const Group& o) const { return size == o.size && stride == o.stride; }
};

// One collective among a group on `cluster`: p is the group's size; the
// group stays on the intra-node link when its ranks fit in one node
// (stride * (size - 1) < gpus_per_node, groups aligned to nodes as
// commtune's node splits are), else the link between nodes sets the pace.
double collective_time(Collective kind, double bytes, const Cluster& cluster, const Group& group);

// The bandwidth (bytes per second per rank, as the formulas above use it)
// that two timed ring allreduces imply, each rank contributing `small` then
// `large` bytes: from their difference, so the per-call software cost
// cancels. 0 when they do not tell (equal times, one rank, bad values).
// Runs store the bandwidth they probed in their profiles (RunSamples::kStoredFormat): a change here bumps that.
double probed_bandwidth(double small_bytes, double small_s, double large_bytes, double large_s, int ranks);

// A link as one run's probe saw it. On a loaded machine the probe's timed
// attempts wait for the scheduler more than for the wire (a 4 MiB loopback
// allreduce: 2 ms alone, 2-17 ms beside two busy programs), and either
// message's wait moves a bandwidth taken from their difference: the link
// lies between bytes_per_s / slower and bytes_per_s * faster, the widest
// transfer times the two messages' best and median attempts allow
// (link_from_probe).
struct LinkProbe {
  double bytes_per_s = 0;  // 0: not probed, or the probe did not tell
  double slower = 1;       // factors bounding the link's bandwidth (1 and 1: exact, or unknown)
  double faster = 1;
};
// The factor of a bound the attempts do not give (a small message that
// waited as long as the large one): as good as none.
inline constexpr double kUnbounded = 1e6;

// Whether two probes can be of one link: their bounds within a factor of
// eight of each other (one quiet link probes within 2x, a 50 Mbit/s shaper
// is over 100x from the loopback). An unprobed link is taken as the other's.
bool same_link(const LinkProbe& a, const LinkProbe& b);
// Why same_link says no: "1.29 GB/s (its attempts: 1.1-1.5) against 0.0031
// GB/s (0.0031-0.0031), bounds more than the x8 two probes of one link may
// differ by apart".
std::string describe_link_difference(const LinkProbe& a, const LinkProbe& b);

// Where a run stores a collective's per-step totals (docs/store.md):
// comm.<kind>[@<size>x<stride>] + .bytes, .calls, .seconds
std::string collective_stat_prefix(Collective kind, const Group& group);
struct CollectiveStat {
  Collective kind;
  Group group;
};
// The collective a statistic named `prefix + suffix` is about, if it is one.
std::optional<CollectiveStat> parse_collective_stat(std::string_view name, std::string_view suffix);

}  // namespace commtune::net

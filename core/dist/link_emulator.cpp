#include "core/dist/link_emulator.h"

namespace commtune {

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

LinkEmulator::LinkEmulator(net::Cluster cluster) : cluster_(std::move(cluster)) {
  thread_ = std::thread([this] { release_loop(); });
}

LinkEmulator::~LinkEmulator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

LinkEmulator::Future LinkEmulator::delay(const Future& real, net::Collective kind, double bytes) {
  clock::time_point due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto start = std::max(clock::now(), link_free_);
    due = start + std::chrono::duration_cast<clock::duration>(
                      std::chrono::duration<double>(net::collective_time(kind, bytes, cluster_)));
    link_free_ = due;
  }
  auto out = c10::make_intrusive<c10::ivalue::Future>(real->elementType());
  real->addCallback([this, out, due](c10::ivalue::Future& done) {
    if (done.hasError()) {
      out->setError(done.exception_ptr());
      return;
    }
    if (clock::now() >= due) {
      out->markCompleted(done.value());
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_.push({due, out, done.value()});
    }
    wake_.notify_all();
  });
  return out;
}

void LinkEmulator::release_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (held_.empty()) {
      if (stopping_) return;
      wake_.wait(lock);
      continue;
    }
    const auto due = held_.top().due;
    if (!stopping_ && clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;
    }
    auto held = held_.top();
    held_.pop();
    lock.unlock();
    held.out->markCompleted(std::move(held.value));  // runs the hook's continuations, on this thread
    lock.lock();
  }
}

}  // namespace commtune

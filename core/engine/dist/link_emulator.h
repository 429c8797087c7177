// Link emulation: makes each collective take at least as long as it would on
// a target network (net::collective_time), so a run on one machine shows the
// step times and loss-versus-time curves of the cluster it stands for.
// Collectives share the link one after another, as on a real one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>

#include "core/tuner/config/run_sections.h"
#include "core/tuner/netmodel/network.h"

namespace commtune {

class LinkEmulator {
 public:
  using Future = c10::intrusive_ptr<c10::ivalue::Future>;

  explicit LinkEmulator(net::Cluster cluster);
  ~LinkEmulator();  // completes what is still held back
  LinkEmulator(const LinkEmulator&) = delete;
  LinkEmulator& operator=(const LinkEmulator&) = delete;

  // A future with `real`'s outcome that completes no earlier than the
  // modelled end of this collective, issued now. Failures pass at once.
  Future delay(const Future& real, net::Collective kind, double bytes);
  const net::Cluster& cluster() const { return cluster_; }

 private:
  using clock = std::chrono::steady_clock;
  struct Held {
    clock::time_point due;
    Future out;
    c10::IValue value;
    bool operator>(const Held& other) const { return due > other.due; }
  };
  void release_loop();

  net::Cluster cluster_;
  std::mutex mutex_;
  std::condition_variable wake_;
  clock::time_point link_free_{};
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace commtune

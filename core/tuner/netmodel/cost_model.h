// Will it pay off? A measured run's profile (compute, hook work, and the
// collectives of each bucket) predicts its step time on another cluster.
// docs/network-model.md states the model. In short: a collective's transfer
// moves from this machine's link to the target's (net::collective_time), the
// link carrying one at a time; its reduction and software overlap the
// transfer (Gloo pipelines them), so a bucket's chain of hook work and
// collectives, measured here in wall time, becomes the longer of that chain
// (less the transfer time a faster link saves) and its transfers after the
// hook's own work; a hook that waits on its collectives works on one bucket
// after another; the optimizer updates each bucket's parameters once its chain
// has ended (its share of the optimizer's time by size), one after another;
//   step = data + forward + end of the last update + collectives outside buckets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/netmodel/network.h"
#include "db/store.h"

namespace commtune {

struct CollectiveUse {
  net::Collective kind = net::Collective::Allreduce;
  net::Group group;  // the ranks it ran among
  double bytes = 0;  // per step, over all its calls
  double calls = 0;  // per step
  // Per step, how long its calls took in the measured run (issue to
  // completion). A collective is predicted to take at least this long on
  // any network: the reduction and the software around it stay.
  double local_s = 0;
};

struct BucketProfile {
  std::int32_t index = 0;
  double ready_s = 0;  // after backward started
  // From the hook beginning on the bucket to its result being complete, in
  // wall time: the hook's own work (waiting for a core included) and its
  // collectives; and the hook's own work in it (its time not blocked on a
  // collective). Not recorded by older versions (measured_chain false).
  double chain_s = 0;
  double work_s = 0;
  bool measured_chain = false;
  double fp32_bytes = 0;
  std::vector<CollectiveUse> collectives;
};

// Medians over the steady part of a run (its second half), per step and
// averaged over ranks.
struct RunProfile {
  std::int64_t run_id = 0;
  int world_size = 0;
  std::int64_t steps = 0;  // the steps profiled
  double data_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0;
  double hook_s = 0;         // all hook work
  double hook_inline_s = 0;  // the part done on the backward thread (inside backward_s)
  double measured_step_s = 0;
  // The hook waits on its collectives on a thread of its own, one bucket
  // after another (PowerSGD, the compressors); else collectives run
  // asynchronously, several at once.
  bool serial_hook = false;
  // This machine's link as the run measured it before training: the
  // bandwidth of a ring allreduce, bytes per second per rank (0: unknown).
  double link_bytes_per_s = 0;
  std::vector<BucketProfile> buckets;
  std::vector<CollectiveUse> step_collectives;  // outside any bucket

  // Throws db::Error when the run has too few steps or lacks the statistics
  // (runs stored before the network model existed).
  static RunProfile from_store(const db::Store& store, std::int64_t run_id);
  double collective_bytes() const;  // per step, all collectives
  // The times the hook and its collectives took here (its work, chains,
  // collectives' local times) multiplied by `factor`; compute unchanged.
  void scale_hook_times(double factor);
  nlohmann::json to_json() const;
};

struct StepPrediction {
  double step_s = 0;
  double compute_s = 0;        // data, forward, backward, optimizer
  double communication_s = 0;  // every collective back to back
  double exposed_s = 0;        // communication and off-thread hook work not hidden behind backward
  nlohmann::json to_json() const;
};

StepPrediction predict(const RunProfile& profile, const net::Cluster& cluster);

// The compute a prediction assumes on the target. Communication always comes
// from the profiled run's collectives (bytes and calls do not depend on the
// device); compute is the run's own as measured here, scaled by a factor (a
// faster or slower device), given as forward and backward times, or taken
// from another run of the same model recorded on the target machine (and
// imported into the store). Work that is not given (data loading, the
// optimizer, the hook's own work, the software around each collective)
// scales with forward + backward; gradients become ready at the same
// fractions of backward.
struct TargetCompute {
  enum class Kind { Measured, Scaled, Given, FromRun };
  Kind kind = Kind::Measured;
  double scale = 1;                      // Scaled
  double forward_s = 0, backward_s = 0;  // Given
  std::optional<RunProfile> target_run;  // FromRun: its data, forward, backward and optimizer times

  // "this machine's, pooled ...", "... x 0.05", ...: every prediction says which it assumed.
  std::string describe() const;
};

// `measured` with its compute replaced by the target's.
RunProfile on_target(const RunProfile& measured, const TargetCompute& compute);

}  // namespace commtune

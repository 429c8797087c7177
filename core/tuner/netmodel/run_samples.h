// A run's steady steps as the store holds them, one value per step averaged
// over ranks: the raw material of a RunProfile. Kept per step (not reduced to
// medians at once) so that a profile can be taken over any resample of the
// steps: the bootstrap behind every predicted figure's interval
// (core/tuner/verdict/evidence.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tuner/netmodel/cost_model.h"
#include "db/store.h"

namespace commtune {

struct CollectiveSeries {
  net::Collective kind = net::Collective::Allreduce;
  net::Group group;
  std::int32_t bucket = db::kWholeStep;
  // Per steady step. In a bucket: NaN where no rank reported it. Outside
  // buckets: 0 where none did (parameter averaging every few steps is
  // amortised over the steps between).
  std::vector<double> bytes, calls, seconds;
};

// A run's `link_probe` (written by core/engine/train/trainer.cpp): two message
// sizes, the best time of each and (runs since 2026-11) every timed attempt.
net::LinkProbe link_from_probe(const nlohmann::json& probe, int ranks);
// A stored run's link, its steps left unread: from its digest when it has
// ended, else from its start event; not probed ({}) when neither holds one
// or the event is unreadable.
net::LinkProbe run_link(const db::Store& store, const db::RunRecord& run);
// The same without the store (safe on any thread): nullopt when only the
// start event can tell.
std::optional<net::LinkProbe> stored_link(const db::RunRecord& run);

struct RunSamples {
  std::int64_t run_id = 0;
  int world_size = 0;
  std::vector<std::int64_t> steps;  // the steady steps (run_metrics.h), in order
  // Per steady step, averaged over ranks. `optimizer` leaves out collectives
  // outside buckets (modelled on their own); `pure_backward` is backward
  // without the hook work done on the backward thread.
  std::vector<double> data, forward, backward, pure_backward, optimizer, hook, hook_inline, total;
  std::vector<double> wire_bytes, uncompressed_bytes;  // per rank
  std::map<std::int32_t, std::vector<double>> ready;   // bucket -> seconds after backward started (NaN: not reported)
  std::map<std::int32_t, std::vector<double>> chain;   // bucket -> its hook chain's wall time (NaN: not reported)
  std::map<std::int32_t, std::vector<double>> work;    // bucket -> the hook's own work in it, wall time
  bool serial_hook = false;                             // from the run's start
  net::LinkProbe link;                                  // this machine's link, probed at the start
  std::vector<CollectiveSeries> collectives;
  std::map<std::int32_t, double> bucket_fp32_bytes;  // the newest layout's

  // Throws db::Error when the run has too few steps or lacks the statistics
  // (runs stored before the network model existed).
  static RunSamples from_store(const db::Store& store, std::int64_t run_id);
  // The same, for a run already read (its row is not read again).
  static RunSamples from_store(const db::Store& store, const db::RunRecord& run);

  // What a run stores when it ends (RunEnd::samples), read instead of its
  // steps (run_samples_codec.cpp). kStoredFormat names the layout and the
  // way from_store derives samples from steps: change either, and bump it,
  // so that profiles stored before are read from the steps again.
  static constexpr std::uint32_t kStoredFormat = 3;
  std::string encode() const;
  // nullopt for bytes of another format, that do not hold one whole
  // RunSamples, or whose ranks are not the run's `world_size` (a damaged
  // profile is none: the steps answer).
  static std::optional<RunSamples> decode(std::string_view bytes, std::int64_t run_id, std::int64_t world_size);

  std::size_t size() const { return steps.size(); }
  // Scales every wall and CPU time the hook and its collectives took by
  // `factor`: a run measured while the machine ran at another speed,
  // brought to a common one (core/tuner/verdict/evidence.h). Compute stays.
  void scale_hook_times(double factor);
  // Medians (means for collectives outside buckets) over the steps at
  // `picks`, indices into `steps` that may repeat.
  RunProfile profile(const std::vector<std::size_t>& picks) const;
  RunProfile profile() const;  // over every steady step
};

}  // namespace commtune

// The plain sections of a run's configuration that the engine reads as typed
// options: `ddp` (the reducer), `network` (link emulation) and `checkpoint`.
// Declared here, outside the engine, so the tuner validates them with the same
// schema the worker trains with. And `script`, which only the tuner reads: a
// run whose job is the user's own training script rather than the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/netmodel/network.h"
#include "core/tuner/schema/param_schema.h"

namespace commtune {

struct ReducerOptions {
  static constexpr double kDefaultBucketCapMb = 25;
  double bucket_cap_mb = kDefaultBucketCapMb;
  double first_bucket_cap_mb = 0;  // 0: as DDP (first_bucket_cap)
  bool rebuild_buckets = true;
  bool capture_local_gradients = false;  // keep a copy of each step's pre-reduction gradients

  static Schema<ReducerOptions> schema();
  // The first bucket's cap in MiB: first_bucket_cap_mb when set, else the
  // one DistributedDataParallel(bucket_cap_mb=...) takes in PyTorch 2.x: its
  // own 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES) only when bucket_cap_mb is
  // left at its default, else bucket_cap_mb. (1.13 kept 1 MiB whatever
  // bucket_cap_mb was.) RunConfig::parse stores it, so a run's config says it.
  double first_bucket_cap() const;
};

// The `network` section of a run's configuration.
struct NetworkOptions {
  std::string emulate = "none";
  double bandwidth_gbit_s = 1;
  double latency_us = 50;
  std::int64_t ranks_per_node = 1;

  static Schema<NetworkOptions> schema();
  // The cluster the run's ranks stand for, or nullopt without emulation.
  // Throws ConfigError when ranks_per_node does not divide the world size.
  std::optional<net::Cluster> emulated_cluster(int world_size) const;
};

struct CheckpointOptions {
  std::string dir;
  std::int64_t every = 0;
  std::string resume;
  static Schema<CheckpointOptions> schema();
};

// The `script` section: the user's own DDP training script as the run's job,
// launched under torchrun of `python` with the trial's configuration handed
// over in its environment (python/commtune reads it). Absent, or `path`
// empty: the engine trains the run.
struct ScriptOptions {
  std::string path;
  std::string python = "python3";
  std::string steps_arg;  // the script's option that takes the run's steps ("": the script decides)
  double timeout_s = 300;
  // The script's named options, passed as --NAME VALUE (a true flag as
  // --NAME alone, a false one left out), in name order; then `argv` as given.
  nlohmann::json args = nlohmann::json::object();
  std::vector<std::string> argv;

  static Schema<ScriptOptions> schema();  // the scalar fields; args and argv are read by parse
  bool enabled() const { return !path.empty(); }
  // Reads the section (an object, maybe empty). Throws ConfigError naming the field.
  static ScriptOptions parse(const nlohmann::json& section);
  nlohmann::json to_json() const;
  // What follows the script on its command line, for a run of `steps` steps.
  std::vector<std::string> command_args(std::int64_t steps) const;
  // The declaration of script.args.NAME (any scalar), or the error for a bad name.
  static ParamSpec arg_spec(const std::string& name);
  // The named options as one line, "lr=0.05 tag=a", and back (each word
  // NAME=VALUE, the value read as --set reads one): the app's field for them.
  std::string args_text() const;
  static nlohmann::json args_from_text(std::string_view text);
};

}  // namespace commtune

// One rank of a training job: data shard, model, reducer with the chosen
// hook, optimizer, and the step loop that reports through the event stream.
#pragma once

#include <exception>
#include <string>

#include "core/config/run_config.h"
#include "core/dist/dist_env.h"
#include "core/events/event_writer.h"

namespace commtune {

// Runs this process's rank. `events` may be null (then rank 0 prints a plain
// progress log). Throws on failure.
void train_rank(const RunConfig& config, const DistEnv& env, events::EventWriter* events);

// "config", "communication" or "runtime": the launcher blames the first rank
// whose failure is not a communication error.
std::string failure_kind(const std::exception& error);

// A 64-bit FNV-1a digest of the tensors' bytes (on CPU), in order: equal
// digests mean bit-identical parameters.
std::string tensor_digest(const NamedTensors& tensors);

}  // namespace commtune

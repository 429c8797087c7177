// One rank of a training job: data shard, model, reducer with the chosen
// hook, optimizer, and the step loop that reports through the event stream.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include "core/tuner/config/run_config.h"
#include "core/engine/ddp/flat_parameters.h"
#include "core/engine/dist/dist_env.h"
#include "core/tuner/events/event_writer.h"

namespace commtune {

// A non-finite loss or gradient norm ended the run (run.on_nonfinite=stop).
class DivergedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs this process's rank. `events` may be null (then rank 0 prints a plain
// progress log). Throws on failure; returns whether a non-finite number was
// seen (run.on_nonfinite=warn runs on through it).
bool train_rank(const RunConfig& config, const DistEnv& env, events::EventWriter* events);

// "config", "communication", "diverged" or "runtime": the launcher blames
// the first rank whose failure is not a communication error.
std::string failure_kind(const std::exception& error);

// The error as one line for the user: libtorch's errors without their
// backtrace (the frames stay in the worker's output when it is echoed).
std::string failure_message(const std::exception& error);

// A 64-bit FNV-1a digest of the tensors' bytes (on CPU), in order: equal
// digests mean bit-identical parameters.
std::string tensor_digest(const NamedTensors& tensors);

}  // namespace commtune

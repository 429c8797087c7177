// Checkpoints: everything one rank needs to continue a run exactly where it
// stopped. A checkpoint is a folder, <dir>/step-000020, with one file per
// rank (error feedback and other hook state differ between ranks) and the
// run's configuration.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/engine/data/data_loader.h"
#include "core/engine/ddp/reducer.h"
#include "core/engine/optim/optimizer.h"
#include "core/tuner/config/run_sections.h"

namespace commtune {

std::string checkpoint_folder(const std::string& dir, std::int64_t step);
std::string checkpoint_file(const std::string& folder, int rank);

// Rank `rank`'s file of a checkpoint folder, checked to be a commtune
// checkpoint of the version this build writes. Throws std::runtime_error
// naming the file.
c10::impl::GenericDict read_checkpoint(const std::string& folder, int rank);

// `dict[key]`, or read_checkpoint_entries' error naming the missing entry.
c10::IValue checkpoint_entry(const c10::impl::GenericDict& dict, const std::string& key);

// Runs `read` over a checkpoint's contents: an entry missing or of another
// type (libtorch's type asserts, a dict's at()) becomes one
// std::runtime_error that names `where`, never libtorch's internal message.
void read_checkpoint_entries(const std::string& where, const std::function<void()>& read);

// The parts of a rank that carry state from one step to the next.
struct TrainingState {
  FlatParameters& params;
  Reducer& reducer;
  Optimizer& optimizer;
  CommHook& hook;
  ShardedLoader& loader;

  // Writes this rank's file; the step to run next is `next_step`.
  void save(const std::string& folder, std::int64_t next_step, int rank, int world_size) const;
  // Restores this rank from a checkpoint folder; returns the step to run next.
  // Errors that a wrong folder causes name checkpoint.resume.
  std::int64_t load(const std::string& folder, int rank, int world_size);

 private:
  std::int64_t load_checked(const std::string& folder, int rank, int world_size);
};

}  // namespace commtune

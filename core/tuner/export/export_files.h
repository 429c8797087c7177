// What every production export shares: writing its files, and how the
// production job must build its DDP to bucket as the commtune run did.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/tuner/io/output_file.h"

namespace commtune {

// A configuration from outside (a stored run, a summary file, a checkpoint
// folder) as the schema reads it, defaults filled in: every value that
// reaches a generated file is one the schema allows (names from fixed lists,
// numbers as numbers). Throws ConfigError naming the field.
nlohmann::json validated_config(const nlohmann::json& raw);

// The command that runs an exported file's own check on one machine: two
// ranks, Gloo on the CPU (NCCL where every rank has a GPU).
std::string check_command(const std::string& file);

// What an exported file adds to the helpers every export shares.
struct ExportedJob {
  std::string file;   // the file's name, as the check command names it
  std::string setup;  // check_here()'s lines after `ddp_model = make_ddp(model)` (4 spaces in; may set `averager`)
  std::string usage;  // Python comments: how a job uses the file, after `ddp_model = make_ddp(model)`
  int check_steps = 6;
};

// Python source shared by every export: make_ddp(model) (DistributedDataParallel
// bucketed like the run, on CPU/Gloo or GPU/NCCL alike), load_checkpoint()
// (a commtune checkpoint file into a model and optimizer by parameter name,
// refusing another model), finish() (a teardown that exits 0), check_here()
// (a few steps of a small model with the exported hook) run as __main__,
// and the usage lines.
std::string job_source(const nlohmann::json& config, const ExportedJob& job);

// Python source of gloo_bf16_compress_hook and gloo_bf16_compress_wrapper:
// PyTorch's own bf16 hooks, under names DDP registers in a PyTorch without
// NCCL (it refuses theirs by name there, though Gloo sums bf16 in 2.x).
std::string gloo_bf16_source();

}  // namespace commtune

// What every production export shares: writing its files, and how the
// production job must build its DDP to bucket as the commtune run did.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace commtune {

// Writes `text` to a new file beside `path` and renames it over `path`: a
// symlink or another file already at `path` is replaced, never written
// through, and a reader never sees half a file.
void write_text_file(const std::filesystem::path& path, const std::string& text);

// A configuration from outside (a stored run, a summary file, a checkpoint
// folder) as the schema reads it, defaults filled in: every value that
// reaches a generated file is one the schema allows (names from fixed lists,
// numbers as numbers). Throws ConfigError naming the field.
nlohmann::json validated_config(const nlohmann::json& raw);

// Python source of make_ddp(model): the model in DistributedDataParallel,
// bucketed like the run, on CPU (Gloo) or GPU (NCCL) alike; then the usage
// lines `usage` (Python comments) after a header that names torchrun.
std::string make_ddp_source(const nlohmann::json& config, const std::string& usage);

}  // namespace commtune

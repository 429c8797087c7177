// What every production export shares: writing its files, and how the
// production job must build its DDP to bucket as the commtune run did.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace commtune {

void write_text_file(const std::filesystem::path& path, const std::string& text);

// Python source of make_ddp(model): the model in DistributedDataParallel,
// bucketed like the run, on CPU (Gloo) or GPU (NCCL) alike; then the usage
// lines `usage` (Python comments) after a header that names torchrun.
std::string make_ddp_source(const nlohmann::json& config, const std::string& usage);

}  // namespace commtune

// What every production export shares: writing its files, and how the
// production job must build its DDP to bucket as the commtune run did.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace commtune {

void write_text_file(const std::filesystem::path& path, const std::string& text);

// Python comment lines: the DDP construction that buckets like the run.
std::string ddp_bucketing_comment(const nlohmann::json& config);

}  // namespace commtune

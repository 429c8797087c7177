// Whether a hook sends anything compressed for a model: a compressor leaves
// buckets under its minimum size alone; PowerSGD leaves matrices it cannot
// shrink; post-local SGD over one group of every rank sends what allreduce
// does. The tuner's sweep plan asks here through the engine's check
// (core/tuner/config/engine_check.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

// Why the hook would send every bucket uncompressed for a model with these
// parameter shapes (in the model's order), as "field: problem"; "" when it
// compresses some. Buckets are laid out as DDP does after its rebuild
// (gradients ready in reverse parameter order, the first bucket capped at
// ddp.first_bucket_cap_mb).
struct SizeProblem {
  std::string field;
  std::string problem;
  explicit operator bool() const { return !problem.empty(); }
};
SizeProblem hook_size_problem(const nlohmann::json& run_config, const std::vector<std::vector<std::int64_t>>& shapes);

}  // namespace commtune

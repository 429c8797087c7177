#include "core/engine/hooks/hook_size.h"

#include <algorithm>
#include <cstdio>

#include "core/engine/compress/compressor.h"
#include "core/engine/ddp/flat_parameters.h"
#include "core/engine/ddp/reducer.h"
#include "core/engine/hooks/local_sgd.h"
#include "core/engine/hooks/powersgd.h"

namespace commtune {

namespace {

const nlohmann::json& hook_section(const nlohmann::json& run_config) {
  static const nlohmann::json empty = nlohmann::json::object();
  return run_config.is_object() && run_config.contains("hook") && run_config["hook"].is_object() ? run_config["hook"]
                                                                                                 : empty;
}

std::string mib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

SizeProblem hook_size_problem(const nlohmann::json& run_config, const std::vector<std::vector<std::int64_t>>& shapes) {
  const auto& hook = hook_section(run_config);
  if (hook.value("wrapper", std::string("none")) != "none") return {};
  const auto name = hook.value("name", std::string("allreduce"));
  if (name == "post_local_sgd") {
    const auto o = PostLocalSgdOptions::schema().read(hook, "hook");
    const auto world = run_config.value("world_size", std::int64_t{0});
    if (o.post_local_gradient_allreduce && o.hierarchy.empty() && (o.subgroup_size == 0 || o.subgroup_size == world))
      return {"hook.subgroup_size",
              "with subgroups of every rank (0 in a run on one machine) and post_local_gradient_allreduce on, "
              "post-local SGD still allreduces every gradient over all ranks and averages parameters on top: it "
              "never sends less than allreduce"};
    return {};
  }
  if (shapes.empty()) return {};
  if (name == "powersgd") {
    const auto o = PowerSgdOptions::schema().read(hook, "hook");
    for (const auto& shape : shapes) {
      if (shape.size() < 2) continue;
      std::int64_t n = shape[0], m = 1;
      for (std::size_t d = 1; d < shape.size(); ++d) m *= shape[d];
      const auto r = std::min({n, m, o.matrix_approximation_rank});
      if (static_cast<double>((n + m) * r) * o.min_compression_rate < static_cast<double>(n * m)) return {};
    }
    return {"hook.matrix_approximation_rank",
            "at rank " + std::to_string(o.matrix_approximation_rank) + " with min_compression_rate " +
                std::to_string(o.min_compression_rate) +
                " no parameter matrix of this model is worth compressing: PowerSGD would allreduce them all"};
  }
  if (name == "byteps") {
    const auto o = CompressorOptions::schema().read(hook, "hook");
    const auto ddp = ReducerOptions::schema().read(run_config.value("ddp", nlohmann::json::object()), "ddp");
    std::vector<std::size_t> ready(shapes.size());
    std::vector<std::int64_t> bytes(shapes.size());
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      ready[i] = shapes.size() - 1 - i;
      std::int64_t numel = 1;
      for (const auto d : shapes[i]) numel *= d;
      bytes[i] = 4 * numel;
    }
    if (o.byteps_aggregation == "server") {  // BytePS compares each parameter with the threshold
      const auto largest = bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
      if (largest < o.byteps_min_compress_bytes)
        return {"hook.byteps_min_compress_bytes",
                std::to_string(o.byteps_min_compress_bytes) + " bytes is above every parameter of this model (the "
                "largest " + mib(largest) + "): every gradient would be sent uncompressed"};
      return {};
    }
    constexpr double kMiB = 1024.0 * 1024.0;
    std::int64_t largest = 0;
    for (const auto& bucket :
         assign_buckets(ready, bytes,
                        {static_cast<std::int64_t>(ddp.first_bucket_cap() * kMiB),
                         static_cast<std::int64_t>(ddp.bucket_cap_mb * kMiB)})) {
      std::int64_t sum = 0;
      for (const auto i : bucket) sum += bytes[i];
      largest = std::max(largest, sum);
    }
    if (largest < o.byteps_min_compress_bytes)
      return {"hook.byteps_min_compress_bytes",
              std::to_string(o.byteps_min_compress_bytes) + " bytes is above every bucket of this model (the largest " +
                  mib(largest) + "): every bucket would be allreduced uncompressed"};
  }
  return {};
}

}  // namespace commtune

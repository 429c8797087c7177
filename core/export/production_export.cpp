#include "core/export/production_export.h"

#include <filesystem>

#include "core/export/export_files.h"
#include "core/export/powersgd_export.h"
#include "core/schema/param_schema.h"

namespace commtune {

namespace {

// PyTorch's name for one of the default hooks, as registered on a DDP model.
std::string default_hook_expression(const std::string& name) {
  if (name == "allreduce") return "default_hooks.allreduce_hook";
  if (name == "fp16_compress") return "default_hooks.fp16_compress_hook";
  if (name == "bf16_compress") return "default_hooks.bf16_compress_hook";
  throw ConfigError("hook.name", "hook '" + name + "' has no production form to export");
}

std::string default_hook_snippet(const nlohmann::json& config) {
  const auto& hook = config.at("hook");
  const auto name = hook.at("name").get<std::string>();
  const auto wrapper = hook.value("wrapper", "none");
  std::string body;
  if (name == "none" && wrapper == "none") {
    body = "    pass  # DDP's own allreduce: no hook\n";
  } else {
    auto expression = default_hook_expression(name == "none" ? "allreduce" : name);
    if (wrapper != "none") expression = "default_hooks." + wrapper + "_compress_wrapper(" + expression + ")";
    body = "    ddp_model.register_comm_hook(None, " + expression + ")\n";
  }
  return "\"\"\"The communication hook tuned with commtune (hook " + name + ", wrapper " + wrapper +
         "), for a production DDP job (PyTorch >= 1.13).\"\"\"\n"
         "import torch.distributed as dist\n"
         "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n\n\n"
         "def register(ddp_model):\n"
         "    \"\"\"Registers the hook commtune ran (wrapped as it was).\"\"\"\n" +
         body + "\n\n" + ddp_bucketing_comment(config) + "#   register(ddp_model)\n";
}

// The byteps hook's settings as BytePS takes them: its compression_params
// dict (BytePS >= 0.2.4, docs/gradient-compression.md there) and the
// environment variables of its native path.
std::string byteps_snippet(const nlohmann::json& config) {
  const auto& hook = config.at("hook");
  const auto type = hook.value("byteps_compressor_type", "topk");
  nlohmann::json params = {{"compressor", type}};
  if (hook.value("byteps_ef_type", "none") != "none") params["ef"] = hook["byteps_ef_type"];
  if (hook.value("byteps_momentum_type", "none") != "none") {
    params["momentum"] = hook["byteps_momentum_type"];
    params["momentum_mu"] = hook.value("byteps_momentum_mu", 0.9);
  }
  if (type == "onebit") params["scaling"] = hook.value("byteps_compressor_onebit_scaling", true);
  if (type != "onebit") params["k"] = hook.value("byteps_compressor_k", 0.01);
  if (type == "randomk" || type == "dithering") params["seed"] = hook.value("byteps_seed", 0);
  if (type == "dithering") {
    params["partition"] = hook.value("byteps_dithering_partition", 0) == 1 ? "natural" : "linear";
    params["normalize"] = hook.value("byteps_dithering_normalize", 0) == 1 ? "l2" : "max";
  }
  std::string python = params.dump(4);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"true", "True"}, {"false", "False"}})
    for (std::size_t at = 0; (at = python.find(": " + from, at)) != std::string::npos;)
      python.replace(at + 2, from.size(), to);
  return "\"\"\"The gradient compression tuned with commtune, in BytePS's terms (BytePS >= 0.2.4).\n\n"
         "commtune ran it as a DDP communication hook: payloads allgathered and decoded on every rank.\n"
         "BytePS runs the same compressor, error feedback and momentum in its parameter servers.\n\"\"\"\n\n"
         "compression_params = " +
         python +
         "\n\n# With byteps.torch, as its examples do:\n"
         "#   optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),\n"
         "#                                        compression_params=compression_params)\n"
         "# Set the framework's own momentum to 0 when \"momentum\" is given (BytePS applies it).\n"
         "# Tensors under BYTEPS_MIN_COMPRESS_BYTES=" +
         std::to_string(hook.value("byteps_min_compress_bytes", 65536)) + " bytes go uncompressed, as in the run.\n";
}

}  // namespace

std::vector<std::string> export_for_production(const nlohmann::json& config, const std::string& checkpoint_folder,
                                               const std::string& out_dir) {
  namespace fs = std::filesystem;
  const auto name = config.at("hook").at("name").get<std::string>();
  if (name == "powersgd" || name == "batched_powersgd") return export_powersgd(config, checkpoint_folder, out_dir);
  if (name == "noop")
    throw ConfigError("hook.name", "noop skips gradient averaging: a diagnostic, not a hook to run in production");
  const bool byteps = name == "byteps";
  // Throws for hooks without a production form.
  const auto snippet = byteps ? byteps_snippet(config) : default_hook_snippet(config);
  fs::create_directories(out_dir);
  const auto config_path = fs::path(out_dir) / "commtune_config.json";
  write_text_file(config_path, config.dump(2) + "\n");
  const auto snippet_path = fs::path(out_dir) / (byteps ? "byteps_compression.py" : "use_hook.py");
  write_text_file(snippet_path, snippet);
  return {config_path.string(), snippet_path.string()};
}

}  // namespace commtune

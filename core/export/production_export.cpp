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

}  // namespace

std::vector<std::string> export_for_production(const nlohmann::json& config, const std::string& checkpoint_folder,
                                               const std::string& out_dir) {
  namespace fs = std::filesystem;
  const auto name = config.at("hook").at("name").get<std::string>();
  if (name == "powersgd" || name == "batched_powersgd") return export_powersgd(config, checkpoint_folder, out_dir);
  if (name == "noop")
    throw ConfigError("hook.name", "noop skips gradient averaging: a diagnostic, not a hook to run in production");
  const auto snippet = default_hook_snippet(config);  // throws for hooks without a production form
  fs::create_directories(out_dir);
  const auto config_path = fs::path(out_dir) / "commtune_config.json";
  write_text_file(config_path, config.dump(2) + "\n");
  const auto snippet_path = fs::path(out_dir) / "use_hook.py";
  write_text_file(snippet_path, snippet);
  return {config_path.string(), snippet_path.string()};
}

}  // namespace commtune

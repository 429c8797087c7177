#include "core/export/production_export.h"

#include <algorithm>
#include <filesystem>

#include "core/export/export_files.h"
#include "core/export/powersgd_export.h"
#include "core/hooks/local_sgd.h"
#include "core/schema/param_schema.h"

namespace commtune {

namespace {

// The Python expression of a default hook (wrapped as in the run) on NCCL,
// and on Gloo, where PyTorch's bf16 hooks cannot run: gloo_bf16_source()'s.
struct HookExpression {
  std::string nccl, gloo;
  bool uses_bf16 = false;
};

HookExpression default_hook_expression(const std::string& name, const std::string& wrapper) {
  HookExpression e;
  if (name == "allreduce") {
    e = {"default_hooks.allreduce_hook", wrapper == "bf16" ? "gloo_allreduce_hook" : "default_hooks.allreduce_hook"};
  } else if (name == "fp16_compress") {
    e = {"default_hooks.fp16_compress_hook", "default_hooks.fp16_compress_hook"};
  } else if (name == "bf16_compress") {
    e = {"default_hooks.bf16_compress_hook", "gloo_bf16_compress_hook", true};
  } else {
    throw ConfigError("hook.name", "hook '" + name + "' has no production form to export");
  }
  if (wrapper == "fp16") {
    e.nccl = "default_hooks.fp16_compress_wrapper(" + e.nccl + ")";
    e.gloo = "default_hooks.fp16_compress_wrapper(" + e.gloo + ")";
  } else if (wrapper == "bf16") {
    e.nccl = "default_hooks.bf16_compress_wrapper(" + e.nccl + ")";
    e.gloo = "gloo_bf16_compress_wrapper(" + e.gloo + ")";
    e.uses_bf16 = true;
  } else if (wrapper != "none") {
    throw ConfigError("hook.wrapper", "wrapper '" + wrapper + "' has no production form to export");
  }
  return e;
}

std::string default_hook_snippet(const nlohmann::json& config) {
  const auto& hook = config.at("hook");
  const auto name = hook.at("name").get<std::string>();
  const auto wrapper = hook.value("wrapper", "none");
  std::string body, helpers;
  if (name == "none" && wrapper == "none") {
    body = "    pass  # DDP's own allreduce: no hook\n";
  } else {
    const auto e = default_hook_expression(name == "none" ? "allreduce" : name, wrapper);
    if (e.nccl == e.gloo) {
      body = "    ddp_model.register_comm_hook(None, " + e.nccl + ")\n";
    } else {
      body = "    if dist.get_backend() == \"nccl\":\n"
             "        ddp_model.register_comm_hook(None, " + e.nccl + ")\n"
             "    else:  # PyTorch's bf16 hooks need NCCL: the same numbers on Gloo\n"
             "        ddp_model.register_comm_hook(None, " + e.gloo + ")\n";
    }
    if (e.uses_bf16) helpers = gloo_bf16_source();
  }
  const std::string file = "use_hook.py";
  return "\"\"\"The communication hook tuned with commtune (hook " + name + ", wrapper " + wrapper +
         "), for a production DDP job (PyTorch >= 1.13)\non the CPU (Gloo) or GPUs (NCCL). "
         "Check it here (2 ranks):\n\n    " + check_command(file) + "\n\"\"\"\n"
         "import torch\n"
         "import torch.distributed as dist\n"
         "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n\n\n"
         "def register(ddp_model):\n"
         "    \"\"\"Registers the hook commtune ran (wrapped as it was).\"\"\"\n" +
         body + "\n\n" + helpers + job_source(config, {file, "    register(ddp_model)\n", "#   register(ddp_model)\n"});
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

std::string python_value(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return v.dump();
}

// post_local_sgd: PyTorch's own hook and averager, constructed as the run had them.
std::string post_local_sgd_snippet(const nlohmann::json& config) {
  const auto& h = config.at("hook");
  const auto size = h.value("subgroup_size", 0);
  const auto hierarchy = h.value("hierarchy", std::string());
  std::string averager, gloo_averager;
  if (hierarchy.empty()) {
    averager = "averagers.PeriodicModelAverager(period=" + std::to_string(h.value("period", 4)) +
               ", warmup_steps=" + std::to_string(h.value("warmup_steps", 0)) + ")";
  } else {
    std::string pairs;
    for (const auto& [period, group_size] : hierarchy_levels(hierarchy))
      pairs += (pairs.empty() ? "(" : ", (") + std::to_string(period) + ", " + std::to_string(group_size) + ")";
    const auto warmup = std::to_string(h.value("warmup_steps", 0));
    averager = "(hierarchical_model_averager.HierarchicalModelAverager(OrderedDict([" + pairs +
               "]), warmup_steps=" + warmup + ")\n            if torch.cuda.is_available() else GlooHierarchicalAverager([" +
               pairs + "], warmup_steps=" + warmup + "))";
    gloo_averager =
        "\n\nclass GlooHierarchicalAverager:\n"
        "    \"\"\"HierarchicalModelAverager's logic where PyTorch 1.13's wants CUDA (for dist.new_subgroups):\n"
        "    at each step past warmup, the largest level whose period divides the step averages within\n"
        "    its groups of consecutive ranks.\"\"\"\n\n"
        "    def __init__(self, levels, warmup_steps):\n"
        "        world, rank = dist.get_world_size(), dist.get_rank()\n"
        "        self.levels, self.warmup_steps, self.step = [], warmup_steps, 0\n"
        "        for period, size in levels:\n"
        "            groups = [dist.new_group(list(range(start, start + size))) if size != world else "
        "dist.group.WORLD\n"
        "                      for start in range(0, world, size)]\n"
        "            self.levels.append((period, groups[rank // size]))\n\n"
        "    def average_parameters(self, params):\n"
        "        if self.step >= self.warmup_steps:\n"
        "            for period, group in reversed(self.levels):\n"
        "                if self.step % period == 0:\n"
        "                    model_averaging_utils.average_parameters_or_parameter_groups(params, group)\n"
        "                    break\n"
        "        self.step += 1\n";
  }
  // dist.new_subgroups (and PyTorch's default, one subgroup per machine)
  // wants CUDA in 1.13: the same consecutive groups by new_group run anywhere.
  const std::string subgroup =
      std::string("    size = ") +
      (size > 0 ? std::to_string(size)
                : std::string("int(os.environ.get(\"LOCAL_WORLD_SIZE\", dist.get_world_size()))  # one per machine")) +
      "\n"
      "    groups = [dist.new_group(list(range(start, start + size)))\n"
      "              for start in range(0, dist.get_world_size(), size)]  # every rank makes every group\n"
      "    subgroup = groups[dist.get_rank() // size]\n";
  const std::string file = "use_post_local_sgd.py";
  // Long enough for local SGD to start and average at least twice.
  const int check_steps = static_cast<int>(std::clamp<std::int64_t>(
      h.value("start_localSGD_iter", 10) + 2 * h.value("period", 4) + 2, 6, 2000));
  return "\"\"\"Post-local SGD as tuned with commtune, for a production DDP job (PyTorch >= 1.13).\n"
         "Check it here (2 ranks):\n\n    " + check_command(file) + "\n\"\"\"\n"
         "import os\n"
         "from collections import OrderedDict\n\n"
         "import torch\n"
         "import torch.distributed as dist\n"
         "from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook\n"
         "from torch.distributed.algorithms.model_averaging import averagers, hierarchical_model_averager\n"
         "from torch.distributed.algorithms.model_averaging import utils as model_averaging_utils\n\n\n"
         "def register(ddp_model):\n"
         "    \"\"\"Registers the hook; returns the averager to call after every optimizer.step():\n"
         "    averager.average_parameters(ddp_model.parameters()).\"\"\"\n" +
         subgroup +
         "    state = post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=subgroup,\n"
         "                                                 start_localSGD_iter=" +
         std::to_string(h.value("start_localSGD_iter", 10)) +
         ",\n"
         "                                                 post_local_gradient_allreduce=" +
         python_value(h.value("post_local_gradient_allreduce", true)) +
         ")\n"
         "    ddp_model.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)\n"
         "    return " +
         averager + "\n" + gloo_averager + "\n\n" +
         job_source(config, {file, "    averager = register(ddp_model)\n",
                             "#   averager = register(ddp_model)\n"
                             "#   ... after every optimizer.step():  averager.average_parameters(ddp_model.parameters())\n",
                             check_steps});
}

// slowmo: fairscale's SlowMoDistributedDataParallel with the run's parameters.
std::string slowmo_snippet(const nlohmann::json& config) {
  const auto& h = config.at("hook");
  std::string args;
  const auto base = h.value("slowmo_base_algorithm", std::string("localsgd"));
  args += ",\n        slowmo_base_algorithm=SlowMoBaseAlgorithm." + std::string(base == "sgp" ? "SGP" : "LOCALSGD");
  for (const char* key : {"nprocs_per_node", "localsgd_frequency", "slowmo_frequency", "slowmo_momentum", "slowmo_lr",
                          "slowmo_memory_efficient", "slowmo_num_shards"})
    if (h.contains(key)) args += ",\n        " + std::string(key) + "=" + python_value(h.at(key));
  return "\"\"\"SlowMo as tuned with commtune, for a production job with fairscale\n"
         "(fairscale.experimental.nn.data_parallel.SlowMoDistributedDataParallel).\"\"\"\n"
         "from fairscale.experimental.nn.data_parallel import SlowMoBaseAlgorithm, SlowMoDistributedDataParallel\n\n\n"
         "def wrap(model):\n"
         "    \"\"\"The model wrapped as commtune ran it; call model.perform_slowmo(optimizer) after every\n"
         "    optimizer.step().\"\"\"\n"
         "    return SlowMoDistributedDataParallel(\n        model" +
         args + ")\n";
}

}  // namespace

std::vector<std::string> export_for_production(const nlohmann::json& raw_config, const std::string& checkpoint_folder,
                                               const std::string& out_dir) {
  namespace fs = std::filesystem;
  const auto config = validated_config(raw_config);
  const auto name = config.at("hook").at("name").get<std::string>();
  if (name == "powersgd" || name == "batched_powersgd") return export_powersgd(config, checkpoint_folder, out_dir);
  if (name == "noop")
    throw ConfigError("hook.name", "noop skips gradient averaging: a diagnostic, not a hook to run in production");
  // Throws for hooks without a production form.
  std::string snippet, file = "use_hook.py";
  if (name == "byteps") {
    snippet = byteps_snippet(config);
    file = "byteps_compression.py";
  } else if (name == "post_local_sgd") {
    snippet = post_local_sgd_snippet(config);
    file = "use_post_local_sgd.py";
  } else if (name == "slowmo") {
    snippet = slowmo_snippet(config);
    file = "use_slowmo.py";
  } else {
    snippet = default_hook_snippet(config);
  }
  fs::create_directories(out_dir);
  const auto config_path = fs::path(out_dir) / "commtune_config.json";
  write_text_file(config_path, config.dump(2) + "\n");
  const auto snippet_path = fs::path(out_dir) / file;
  write_text_file(snippet_path, snippet);
  return {config_path.string(), snippet_path.string()};
}

}  // namespace commtune

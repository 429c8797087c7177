#include "core/tuner/export/production_export.h"

#include <algorithm>
#include <filesystem>

#include "core/tuner/export/byteps_torch_hook.h"
#include "core/tuner/export/export_files.h"
#include "core/tuner/export/powersgd_export.h"
#include "core/tuner/config/world_groups.h"
#include "core/tuner/schema/param_schema.h"

namespace commtune {

namespace {

// The Python expression of a default hook (wrapped as in the run) on NCCL,
// and on Gloo, where DDP refuses PyTorch's bf16 hooks by name in a PyTorch
// without NCCL: gloo_bf16_source()'s.
struct HookExpression {
  std::string nccl, gloo;
  bool uses_bf16 = false;
};

HookExpression default_hook_expression(const std::string& name, const std::string& wrapper) {
  HookExpression e;
  if (name == "allreduce") {
    e = {"default_hooks.allreduce_hook", "default_hooks.allreduce_hook"};
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
             "    else:  # the same hooks under names DDP takes without NCCL\n"
             "        ddp_model.register_comm_hook(None, " + e.gloo + ")\n";
    }
    if (e.uses_bf16) helpers = gloo_bf16_source();
  }
  const std::string file = "use_hook.py";
  return "\"\"\"The communication hook tuned with commtune (hook " + name + ", wrapper " + wrapper +
         "), for a production DDP job (PyTorch 2.x)\non the CPU (Gloo) or GPUs (NCCL). "
         "Check it here (2 ranks):\n\n    " + check_command(file) + "\n\"\"\"\n"
         "import torch\n"
         "import torch.distributed as dist\n"
         "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n\n\n"
         "def register(ddp_model):\n"
         "    \"\"\"Registers the hook commtune ran (wrapped as it was).\"\"\"\n" +
         body + "\n\n" + helpers + job_source(config, {file, "    register(ddp_model)\n", "#   register(ddp_model)\n"});
}

std::string python_value(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return v.dump();
}

// A JSON object as a Python dict literal, one key a line.
std::string python_dict(const nlohmann::json& object) {
  std::string out = "{";
  for (const auto& [key, value] : object.items())
    out += (out.size() > 1 ? ",\n    " : "\n    ") + nlohmann::json(key).dump() + ": " + python_value(value);
  return out + "\n}";
}

// The byteps hook for BytePS's MXNet DistributedTrainer, the one BytePS
// front end that takes compression_params (byteps/mxnet/__init__.py
// _register_compressor): its keys, and mu where it reads it, from the
// optimizer's momentum.
std::string byteps_mxnet_snippet(const nlohmann::json& config) {
  const auto& hook = config.at("hook");
  const auto& optimizer = config.at("optimizer");
  const auto type = hook.value("byteps_compressor_type", "topk");
  nlohmann::json params = {{"compressor", type}};
  if (hook.value("byteps_ef_type", "none") != "none") params["ef"] = hook["byteps_ef_type"];
  const bool nesterov = hook.value("byteps_momentum_type", "none") != "none";
  if (nesterov) params["momentum"] = hook["byteps_momentum_type"];
  if (type == "onebit") params["scaling"] = hook.value("byteps_compressor_onebit_scaling", true);  // BytePS's default: off
  if (type != "onebit") params["k"] = hook.value("byteps_compressor_k", 0.01);
  if (hook.value("byteps_seed", 0) != 0) params["seed"] = hook["byteps_seed"];
  if (type == "dithering") {
    params["partition"] = hook.value("byteps_dithering_partition", 0) == 1 ? "natural" : "linear";
    params["normalize"] = hook.value("byteps_dithering_normalize", 0) == 1 ? "l2" : "max";
  }
  nlohmann::json optimizer_params = {{"learning_rate", optimizer.value("lr", 0.1)}};
  if (nesterov)
    optimizer_params["momentum"] = hook.value("byteps_momentum_mu", 0.9);
  else if (optimizer.value("momentum", 0.0) != 0.0)
    optimizer_params["momentum"] = optimizer["momentum"];
  const nlohmann::json environment = {
      {"BYTEPS_MIN_COMPRESS_BYTES", std::to_string(hook.value("byteps_min_compress_bytes", 65536))},
      {"BYTEPS_PARTITION_BYTES", std::to_string(hook.value("byteps_partition_bytes", 4096000))}};
  return "\"\"\"The gradient compression tuned with commtune, for BytePS's MXNet DistributedTrainer (BytePS >= "
         "0.2.4),\nthe one BytePS front end that takes compression_params (byteps.torch has none: use_byteps.py,\n"
         "beside this file, is a PyTorch DDP hook that runs the same algorithm where that applies).\n\n"
         "    import byteps.mxnet as bps\n"
         "    trainer = bps.DistributedTrainer(net.collect_params(), \"sgd\", optimizer_params,\n"
         "                                     compression_params=compression_params)\n"
         "    ... trainer.step(batch_size)\n\n"
         "with `environment` set before BytePS starts (bpslaunch reads it).\n\n" +
         std::string(hook.value("byteps_aggregation", "server") == "server"
                         ? ""
                         : "The run used byteps_aggregation=allgather, which is not BytePS's algorithm (no server "
                           "stage):\nBytePS will train differently with these settings than the run did.\n\n") +
         (nesterov ? "BytePS reads the compression momentum's mu from optimizer_params[\"momentum\"] and removes it "
                     "from\nthe optimizer, so the optimizer runs without momentum" +
                         std::string(optimizer.value("momentum", 0.0) != 0.0
                                         ? ", where the run also had optimizer.momentum:\nBytePS cannot give both"
                                         : ", as in the run") +
                         ". With onebit, BytePS also folds weight decay (\"wd\") into\nthat momentum, which "
                         "commtune does not model: leave \"wd\" out to match the run.\n"
                   : std::string("The run had no compression momentum: optimizer_params has the optimizer's own.\n")) +
         "\"\"\"\n\n"
         "compression_params = " + python_dict(params) + "\n\n"
         "optimizer_params = " + python_dict(optimizer_params) + "\n\n"
         "environment = " + python_dict(environment) + "\n";
}

// The byteps hook as a PyTorch DDP hook (python/commtune/byteps_hook.py) with the
// run's settings, and the job helpers every export has.
std::string byteps_torch_snippet(const nlohmann::json& config) {
  const auto& hook = config.at("hook");
  nlohmann::json options;
  for (const char* key : {"byteps_compressor_type", "byteps_compressor_k", "byteps_compressor_onebit_scaling",
                          "byteps_compressor_randomk_rescale", "byteps_ef_type", "byteps_momentum_type",
                          "byteps_momentum_mu", "byteps_seed", "byteps_min_compress_bytes", "byteps_partition_bytes"})
    options[key] = hook.at(key);
  const std::string file = "use_byteps.py";
  return "\"\"\"BytePS's compressed push-pull as tuned with commtune (" +
         hook.at("byteps_compressor_type").get<std::string>() +
         "), as a PyTorch DDP communication hook (PyTorch 2.x),\non the CPU (Gloo) or GPUs (NCCL): each rank "
         "compresses every partition of its large gradients\n(momentum, error feedback, compressor), the pushes are "
         "allgathered, every rank runs the\nserver stage alike (decode, sum in rank order, compress again with the "
         "server's error\nfeedback) and decodes that pull, as commtune's byteps hook does, bit for bit. Compression "
         "runs\non the CPU, as BytePS's does. Check it here (2 ranks):\n\n    " +
         check_command(file) + "\n\"\"\"\n"
         + byteps_torch_hook_source() + "\nOPTIONS = " + python_dict(options) + "\n\n\n" +
         job_source(config, {file, "    register(ddp_model)\n",
                             "#   byteps = register(ddp_model)\n"
                             "#   byteps.follow(optimizer)  # with a learning-rate schedule: error feedback reads it\n"
                             "#   load_hook_memories(byteps, \"step-NNNNNN/rank-R.pt\")  # to continue a commtune run\n"});
}


// post_local_sgd: PyTorch's own hook and averager, constructed as the run had them.
std::string post_local_sgd_snippet(const nlohmann::json& config) {
  const auto& h = config.at("hook");
  const auto size = h.value("subgroup_size", 0);
  const auto hierarchy = h.value("hierarchy", std::string());
  std::string averager;
  if (hierarchy.empty()) {
    averager = "averagers.PeriodicModelAverager(period=" + std::to_string(h.value("period", 4)) +
               ", warmup_steps=" + std::to_string(h.value("warmup_steps", 0)) + ")";
  } else {
    std::string pairs;
    for (const auto& [period, group_size] : hierarchy_levels(hierarchy))
      pairs += (pairs.empty() ? "(" : ", (") + std::to_string(period) + ", " + std::to_string(group_size) + ")";
    averager = "hierarchical_model_averager.HierarchicalModelAverager(OrderedDict([" + pairs +
               "]), warmup_steps=" + std::to_string(h.value("warmup_steps", 0)) + ")";
  }
  // Groups of consecutive ranks; without a size, one per machine (PyTorch's
  // own default counts GPUs, and a CPU job has none).
  const std::string subgroup =
      "    subgroup, _ = dist.new_subgroups(group_size=" +
      (size > 0 ? std::to_string(size) + ")\n"
                : std::string("int(os.environ.get(\"LOCAL_WORLD_SIZE\", dist.get_world_size())))  # one per machine\n"));
  const std::string file = "use_post_local_sgd.py";
  // Long enough for local SGD to start and average at least twice.
  const int check_steps = static_cast<int>(std::clamp<std::int64_t>(
      h.value("start_localSGD_iter", 10) + 2 * h.value("period", 4) + 2, 6, 2000));
  return "\"\"\"Post-local SGD as tuned with commtune, for a production DDP job (PyTorch 2.x).\n"
         "Check it here (2 ranks):\n\n    " + check_command(file) + "\n\"\"\"\n"
         "import os\n"
         "from collections import OrderedDict\n\n"
         "import torch\n"
         "import torch.distributed as dist\n"
         "from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook\n"
         "from torch.distributed.algorithms.model_averaging import averagers, hierarchical_model_averager\n\n\n"
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
         averager + "\n\n\n" +
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
  return "\"\"\"SlowMo as tuned with commtune, for a production job on GPUs with fairscale\n"
         "(fairscale.experimental.nn.data_parallel.SlowMoDistributedDataParallel; fairscale 0.4.13\n"
         "from PyPI imports and wraps on PyTorch 2.11). Its wrapper needs CUDA: it synchronizes the\n"
         "GPU while it builds its process groups. On the CPU, wrap() says so; what runs there is\n"
         "PyTorch's own local SGD, SlowMo's base algorithm without the slow momentum (commtune's\n"
         "hook.name=post_local_sgd, exported as use_post_local_sgd.py).\"\"\"\n"
         "import torch\n"
         "from fairscale.experimental.nn.data_parallel import SlowMoBaseAlgorithm, SlowMoDistributedDataParallel\n\n\n"
         "def wrap(model):\n"
         "    \"\"\"The model wrapped as commtune ran it; call model.perform_slowmo(optimizer) after every\n"
         "    optimizer.step().\"\"\"\n"
         "    if not torch.cuda.is_available():\n"
         "        raise RuntimeError(\"fairscale's SlowMoDistributedDataParallel needs CUDA GPUs; on the CPU, \"\n"
         "                           \"PyTorch's local SGD runs: export a run with hook.name=post_local_sgd\")\n"
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
  fs::create_directories(out_dir);
  const auto config_path = fs::path(out_dir) / "commtune_config.json";
  if (name == "byteps") {
    std::vector<std::string> files{config_path.string(), (fs::path(out_dir) / "byteps_mxnet.py").string()};
    write_file_whole(files[1], byteps_mxnet_snippet(config));
    // Dithering's entropy coding has no Python form here, and the allgather
    // variant is not the algorithm use_byteps.py runs: MXNet only.
    const auto& hook = config.at("hook");
    if (hook.value("byteps_compressor_type", "topk") != "dithering" &&
        hook.value("byteps_aggregation", "server") == "server") {
      files.push_back((fs::path(out_dir) / "use_byteps.py").string());
      write_file_whole(files.back(), byteps_torch_snippet(config));
    }
    write_file_whole(config_path, config.dump(2) + "\n");
    return files;
  }
  std::string snippet, file = "use_hook.py";
  if (name == "post_local_sgd") {
    snippet = post_local_sgd_snippet(config);
    file = "use_post_local_sgd.py";
  } else if (name == "slowmo") {
    snippet = slowmo_snippet(config);
    file = "use_slowmo.py";
  } else {
    snippet = default_hook_snippet(config);
  }
  write_file_whole(config_path, config.dump(2) + "\n");
  const auto snippet_path = fs::path(out_dir) / file;
  write_file_whole(snippet_path, snippet);
  return {config_path.string(), snippet_path.string()};
}

}  // namespace commtune

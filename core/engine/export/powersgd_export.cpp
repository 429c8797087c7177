#include "core/engine/export/powersgd_export.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/tuner/export/export_files.h"
#include "core/engine/io/pickle_file.h"
#include "core/tuner/schema/param_schema.h"
#include "core/engine/train/checkpoint.h"

namespace commtune {

namespace {

using Dict = c10::impl::GenericDict;
Dict string_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

// PyTorch 1.13's weights-only loader refuses Python floats: floats travel as 0-dim float64 tensors.
c10::IValue plain(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number()) return at::scalar_tensor(value.get<double>(), at::kDouble);
  return value.get<std::string>();
}

const char* hook_function(const std::string& name) {
  return name == "batched_powersgd" ? "batched_powerSGD_hook" : "powerSGD_hook";
}

const char* wrapper_function(const std::string& wrapper) {
  if (wrapper == "fp16") return "fp16_compress_wrapper";
  if (wrapper == "bf16") return "bf16_compress_wrapper";
  return "none";
}

Dict hyperparameters(const nlohmann::json& hook) {
  auto out = string_dict();
  for (const char* key : {"matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate",
                          "use_error_feedback", "warm_start", "orthogonalization_epsilon", "random_seed",
                          "compression_stats_logging_frequency", "batch_tensors_with_same_shape"})
    out.insert(key, plain(hook.at(key)));
  return out;
}

Dict base_document(const nlohmann::json& config) {
  const auto& hook = config.at("hook");
  auto doc = string_dict();
  doc.insert("format", std::string(kPowerSgdStateFormat));
  doc.insert("version", kPowerSgdStateVersion);
  doc.insert("hook", std::string(hook_function(hook.at("name"))));
  doc.insert("wrapper", std::string(wrapper_function(hook.value("wrapper", "none"))));
  doc.insert("hyperparameters", hyperparameters(hook));
  auto ddp = string_dict();
  ddp.insert("bucket_cap_mb", plain(config.at("ddp").at("bucket_cap_mb")));
  ddp.insert("first_bucket_cap_mb", plain(config.at("ddp").at("first_bucket_cap_mb")));
  doc.insert("ddp", ddp);
  return doc;
}

// One rank's runtime state, from its checkpoint file, in PowerSGDState's terms.
Dict runtime_state(const std::string& folder, int rank) {
  auto out = string_dict();
  read_checkpoint_entries(checkpoint_file(folder, rank), [&] {
    const auto root = read_checkpoint(folder, rank);
    const auto hook = checkpoint_entry(root, "hook").toGenericDict();
    if (hook.empty() || !hook.contains("iter"))
      throw std::runtime_error(folder + " holds no PowerSGD state (was the run's hook PowerSGD?)");
    out.insert("rank", static_cast<std::int64_t>(rank));
    out.insert("world_size", checkpoint_entry(root, "world_size").toInt());
    out.insert("step", checkpoint_entry(root, "step").toInt());
    for (const char* key : {"iter", "rng_key", "rng_position", "total_numel_before_compression",
                            "total_numel_after_compression", "error_dict", "p_memory_dict", "q_memory_dict"})
      out.insert(key, checkpoint_entry(hook, key));
    // Which parameters each bucket index holds: the production job's DDP must bucket alike.
    const auto names = checkpoint_entry(root, "parameter_names").toList();
    c10::impl::GenericList buckets(c10::ListType::ofStrings());
    for (const auto& bucket : checkpoint_entry(checkpoint_entry(root, "reducer").toGenericDict(), "buckets").toList()) {
      c10::impl::GenericList bucket_names(c10::StringType::get());
      const auto indices = bucket.get().toTensor().to(at::kLong).contiguous();
      const auto* index = indices.data_ptr<std::int64_t>();
      for (std::int64_t i = 0; i < indices.numel(); ++i) {
        if (index[i] < 0 || static_cast<std::size_t>(index[i]) >= names.size())
          throw std::out_of_range("a bucket names parameter " + std::to_string(index[i]) + " of " +
                                  std::to_string(names.size()));
        bucket_names.push_back(names.get(static_cast<std::size_t>(index[i])).toStringRef());
      }
      buckets.push_back(bucket_names);
    }
    out.insert("bucket_parameters", buckets);
    // What resume() checks the production model against.
    auto shapes = string_dict();
    for (const auto& item : checkpoint_entry(root, "model").toGenericDict()) {
      c10::impl::GenericList shape(c10::AnyType::get());  // not IntType: weights_only refuses typed int lists
      for (const auto size : item.value().toTensor().sizes()) shape.push_back(size);
      shapes.insert(item.key(), shape);
    }
    out.insert("parameter_shapes", shapes);
  });
  return out;
}

// use_powersgd.py: loading, registration, and (with runtime state) the exact
// continuation from step `runtime_step`.
std::string snippet(const nlohmann::json& config, std::optional<std::int64_t> runtime_step) {
  const auto& hook = config.at("hook");
  const std::string function = hook_function(hook.at("name"));
  const std::string wrapper = wrapper_function(hook.value("wrapper", "none"));
  // A bf16 wrapper under a name DDP registers without NCCL (gloo_bf16_source).
  const std::string registered = wrapper == "none"                    ? "psgd." + function
                                 : wrapper == "bf16_compress_wrapper" ? "gloo_bf16_compress_wrapper(psgd." + function + ")"
                                                                      : "default_hooks." + wrapper + "(psgd." + function + ")";
  const std::string file = runtime_step ? "powersgd_state-rank0.pt" : "powersgd_state.pt";
  const std::string file_name = "use_powersgd.py";
  std::string s = R"PY("""PowerSGD as tuned with commtune, for a production DDP job (PyTorch 2.x),
on the CPU (Gloo) or GPUs (NCCL).
)PY";
  s += "Check it here (2 ranks):\n\n    " + check_command(file_name) + "\n\n";
  s += runtime_step ? "Files: powersgd_state-rank<R>.pt, one per rank: the hyperparameters and that\n"
                      "rank's runtime state as the run left it before step " +
                          std::to_string(*runtime_step) +
                          " (iteration, random generator,\n"
                          "error and P/Q memories). resume() below continues from there exactly.\n"
                    : std::string("File: powersgd_state.pt, the hyperparameters.\n");
  s += R"PY(
A state file is a plain dict (torch.load(path, weights_only=True) reads it);
these two lines turn it into a PowerSGDState:

    d = torch.load(")PY" +
       file + R"PY(", weights_only=True)
    state = PowerSGDState(None, **{k: v.item() if torch.is_tensor(v) else v for k, v in d["hyperparameters"].items()})
"""
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd


def load_powersgd_state(path, process_group=None):
    """The PowerSGDState of the exported hyperparameters, and the file's contents."""
    d = torch.load(path, weights_only=True)
    assert d["format"] == "commtune.powersgd_state" and d["version"] == 1, path
    hp = {k: v.item() if torch.is_tensor(v) else v for k, v in d["hyperparameters"].items()}
    return psgd.PowerSGDState(process_group=process_group, **hp), d


def register(ddp_model, state):
    """Registers the hook commtune ran (wrapped as it was)."""
)PY" + "    ddp_model.register_comm_hook(state, " + registered + ")\n\n\n" +
       (wrapper == "bf16_compress_wrapper" ? gloo_bf16_source() : std::string());
  if (runtime_step)
    s += R"PY(def resume(ddp_model, state, d, warmup):
    """Continues exactly where commtune stopped. Call it once, after make_ddp() and
    register(), with the job's own weights, optimizer state and data position
    restored to the same step, before the first training step.

    `warmup()` runs one forward and backward of the job (any batch, no optimizer
    step). DDP reduces its first backward as one bucket and then rebuilds its
    buckets; the exported memories belong to the rebuilt buckets. The warm-up's
    gradients are dropped, and the buffers and random generators it touched put
    back, so the next step sees nothing of it; then the runtime state is restored.
    (Restoring it after the job's first optimizer step instead runs that step
    with a fresh state: the losses then drift from commtune's.)"""
    check_model(ddp_model, d["runtime"]["parameter_shapes"])  # before the warm-up touches anything
    module = ddp_model.module
    buffers = [b.detach().clone() for b in module.buffers()]
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    warmup()
    for p in ddp_model.parameters():
        p.grad = None
    with torch.no_grad():
        for b, saved in zip(module.buffers(), buffers):
            b.copy_(saved)
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state_all(cuda_rng)
    _restore_runtime_state(ddp_model, state, d)


def _restore_runtime_state(ddp_model, state, d):
    """The iteration, random generator, and each bucket's error and P/Q memories
    (resume() has checked the model)."""
    rt = d["runtime"]
    device = next(ddp_model.parameters()).device
    state.iter = rt["iter"]
    state.rng.set_state(("MT19937", rt["rng_key"].numpy().astype("uint32"), rt["rng_position"]))
    state.error_dict = {b: t.to(device) for b, t in rt["error_dict"].items()}
    state.p_memory_dict = {b: t.to(device) for b, t in rt["p_memory_dict"].items()}
    state.q_memory_dict = {b: t.to(device) for b, t in rt["q_memory_dict"].items()}
    state.total_numel_before_compression = rt["total_numel_before_compression"]
    state.total_numel_after_compression = rt["total_numel_after_compression"]


)PY";
  const std::string state_file =
      runtime_step ? "\"powersgd_state-rank0.pt\"" : std::string("\"powersgd_state.pt\"");
  // The check needs the hyperparameters alone: rank 0's file, whatever the run's world size.
  ExportedJob job{file_name,
                  "    here = os.path.dirname(os.path.abspath(__file__))\n"
                  "    state, _ = load_powersgd_state(os.path.join(here, " + state_file + "))\n"
                  "    register(ddp_model, state)\n",
                  runtime_step
                      ? "#   state, d = load_powersgd_state(f\"powersgd_state-rank{dist.get_rank()}.pt\")\n"
                        "#   register(ddp_model, state)\n"
                        "#   step = load_checkpoint(model, optimizer, f\"" + checkpoint_folder("", *runtime_step) +
                        "/rank-{dist.get_rank()}.pt\")  # the run's weights and momentum\n"
                        "#   ... the data position at that step, then:\n"
                        "#   resume(ddp_model, state, d, lambda: loss_fn(ddp_model(inputs), targets).backward())\n"
                      : "#   state, _ = load_powersgd_state(\"powersgd_state.pt\")\n"
                        "#   register(ddp_model, state)\n",
                  // Long enough for PowerSGD to start compressing.
                  static_cast<int>(std::clamp<std::int64_t>(
                      config.at("hook").at("start_powerSGD_iter").get<std::int64_t>() + 4, 6, 2000))};
  s += job_source(config, job);
  return s;
}

}  // namespace

std::vector<std::string> write_powersgd_export(const nlohmann::json& raw_config, const std::string& checkpoint_folder,
                                         const std::string& out_dir) {
  const auto config = validated_config(raw_config);
  const auto name = config.at("hook").at("name").get<std::string>();
  if (name != "powersgd" && name != "batched_powersgd")
    throw ConfigError("hook.name", "the run used hook '" + name + "', not powersgd or batched_powersgd");
  namespace fs = std::filesystem;
  fs::create_directories(out_dir);
  std::vector<std::string> files;
  std::optional<std::int64_t> runtime_step;
  if (checkpoint_folder.empty()) {
    const auto path = (fs::path(out_dir) / "powersgd_state.pt").string();
    write_pickle_file(path, base_document(config));
    files.push_back(path);
  } else {
    const int world = static_cast<int>(config.value("world_size", 0));
    int ranks = 0;
    while (fs::exists(checkpoint_file(checkpoint_folder, ranks))) ++ranks;
    if (ranks == 0) throw std::runtime_error(checkpoint_folder + " holds no rank-0.pt: not a checkpoint folder");
    read_checkpoint_entries(checkpoint_file(checkpoint_folder, 0),
                            [&] { runtime_step = checkpoint_entry(read_checkpoint(checkpoint_folder, 0), "step").toInt(); });
    if (world > 0 && ranks != world)
      throw std::runtime_error(checkpoint_folder + " holds " + std::to_string(ranks) + " ranks' files, the run had " +
                               std::to_string(world));
    for (int r = 0; r < ranks; ++r) {
      auto doc = base_document(config);
      doc.insert("runtime", runtime_state(checkpoint_folder, r));
      const auto path = (fs::path(out_dir) / ("powersgd_state-rank" + std::to_string(r) + ".pt")).string();
      write_pickle_file(path, doc);
      files.push_back(path);
    }
  }
  const auto config_path = fs::path(out_dir) / "commtune_config.json";
  write_file_whole(config_path, config.dump(2) + "\n");
  files.push_back(config_path.string());
  const auto snippet_path = fs::path(out_dir) / "use_powersgd.py";
  write_file_whole(snippet_path, snippet(config, runtime_step));
  files.push_back(snippet_path.string());
  return files;
}

}  // namespace commtune

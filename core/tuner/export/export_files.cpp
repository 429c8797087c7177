#include "core/tuner/export/export_files.h"

#include "core/tuner/config/engine_check.h"
#include "core/tuner/config/run_config.h"

namespace commtune {

nlohmann::json validated_config(const nlohmann::json& raw) {
  const auto config = RunConfig::parse(raw);
  check_in_the_engine(config);  // what the components check in code holds too: a generated file holds only such values
  return config.to_json();
}

std::string check_command(const std::string& file) {
  return "python3 -m torch.distributed.run --standalone --nproc_per_node 2 " + file;
}

namespace {

// make_ddp's lines that give DDP the run's bucket caps, from the module
// global DDP reads its first cap from (1.13 always; 2.x only when
// bucket_cap_mb is not given, which then caps every bucket) and the
// bucket_cap_mb argument ("" when left out).
struct BucketArguments {
  std::string lines;
  std::string argument;
};

BucketArguments bucket_arguments(const nlohmann::json& ddp) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const auto first = static_cast<long long>(ddp.at("first_bucket_cap_mb").get<double>() * kMiB);
  const double cap = ddp.at("bucket_cap_mb").get<double>();
  const std::string cap_text = nlohmann::json(cap).dump();
  BucketArguments out{"    dist._DEFAULT_FIRST_BUCKET_BYTES = " + std::to_string(first) + "\n", ""};
  if (cap == ReducerOptions::kDefaultBucketCapMb) return out;  // the default: both versions read the global
  out.argument = ", bucket_cap_mb=" + cap_text;
  if (first != static_cast<long long>(cap * kMiB))
    out.lines += "    if int(torch.__version__.split(\".\")[0]) >= 2:\n"
                 "        raise RuntimeError(\"PyTorch 2.x's DDP caps every bucket at bucket_cap_mb when it is given: the \"\n"
                 "                           \"run's first bucket of " + std::to_string(first) + " bytes before buckets of " +
                 cap_text + " MiB cannot be \"\n"
                 "                           \"had there (run commtune with ddp.first_bucket_cap_mb=0, DDP's own rule)\")\n";
  return out;
}

}  // namespace

std::string job_source(const nlohmann::json& config, const ExportedJob& job) {
  const auto buckets = bucket_arguments(config.at("ddp"));
  return R"PY(def make_ddp(model):
    """`model` (already on its device) in DistributedDataParallel, bucketed like the commtune run:
    on a GPU (NCCL) with device_ids=[its device], on the CPU (Gloo) without."""
    # DDP reads its first bucket's cap from this module global when it is built (PyTorch 2.x
    # only when bucket_cap_mb is not given; given, it caps every bucket).
)PY" + buckets.lines + R"PY(    device = next(model.parameters()).device
    device_ids = [device] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)PY" +
         buckets.argument + R"PY()


def trainable(model):
    """The module under a DDP wrapper, and its trainable parameters by name (what commtune trains)."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    return model, {name: p for name, p in model.named_parameters() if p.requires_grad}


def check_model(model, shapes):
    """Refuses, in one line naming the parameter, a model whose trainable parameters' names or
    shapes differ from `shapes` (name -> shape): state loaded into another model trains silently wrong."""
    mine = {name: list(p.shape) for name, p in trainable(model)[1].items()}
    for name, shape in shapes.items():
        if name not in mine:
            raise ValueError(f"the model has no parameter {name!r} (the run's model had it, shape {list(shape)})")
        if mine[name] != list(shape):
            raise ValueError(f"parameter {name!r} has shape {mine[name]} in the model, {list(shape)} in the run")
    for name in mine:
        if name not in shapes:
            raise ValueError(f"the model's parameter {name!r} is not in the run's model")


def load_checkpoint(model, optimizer, path):
    """A commtune checkpoint file (step-NNNNNN/rank-R.pt, this rank's) into `model` and a
    torch.optim optimizer over its parameters, by parameter name; returns the step to run next.
    The file is a plain dict: "model" holds the trainable parameters by name (a state_dict;
    commtune keeps no buffers), "optimizer_state" maps each one's name to what torch.optim keeps
    in optimizer.state[parameter]."""
    ck = torch.load(path, weights_only=True)
    if ck.get("format") != "commtune.checkpoint" or ck.get("version") != 2:
        raise ValueError(f"{path} is not a commtune checkpoint of version 2")
    module, parameters = trainable(model)
    check_model(module, {name: list(t.shape) for name, t in ck["model"].items()})
    module.load_state_dict(ck["model"], strict=False)  # checked above: only buffers may be left out
    for name, p in parameters.items():
        state = {key: value.to(p.device).clone() for key, value in ck["optimizer_state"][name].items()}
        if "exp_avg" in state:  # Adam counts its steps per parameter
            state["step"] = torch.tensor(float(ck["optimizer"]["adam_steps"]))
        optimizer.state[p] = state
    return ck["step"]


def finish(exit_code=0):
    """Ends this rank's process with `exit_code`: call it last, on every rank. PyTorch cannot
    always tear Gloo down after Python hooks ran (1.13 and 2.11 alike: a rank aborts with
    "terminate called without an active exception", 3 runs in 28 of a bf16-wrapped check here
    with destroy_process_group(), or hangs in the process group's destructor), and torchrun then
    reports the job failed; so after a barrier, which lets every rank's last collective
    finish, the process exits without running destructors."""
    import logging
    import os
    import sys
    dist.barrier()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)


def check_here(steps=)PY" +
         std::to_string(job.check_steps) + R"PY():
    """What `)PY" + check_command(job.file) + R"PY(` runs: a small model
    trained for a few steps with the exported hook on this machine, then a clean exit."""
    import os
    from datetime import timedelta
    on_gpu = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"])
    dist.init_process_group("nccl" if on_gpu else "gloo", timeout=timedelta(minutes=5))
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 4)).to(device)
    ddp_model = make_ddp(model)
    averager = None
)PY" + job.setup +
         R"PY(    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(dist.get_rank())
    losses = []
    for _ in range(steps):
        inputs = torch.randn(16, 32, generator=generator).to(device)
        targets = torch.randint(0, 4, (16,), generator=generator).to(device)
        loss = torch.nn.functional.cross_entropy(ddp_model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if averager is not None:
            averager.average_parameters(ddp_model.parameters())
        losses.append(loss.item())
    if not all(map(torch.isfinite, map(torch.tensor, losses))):
        raise RuntimeError(f"the check's losses are not finite: {losses}")
    if dist.get_rank() == 0:
        print(f")PY" + job.file + R"PY(: {steps} steps on {dist.get_world_size()} ranks ({dist.get_backend()}), "
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    finish()


# In a job started by torchrun (or srun), once dist.init_process_group("nccl" or "gloo") ran:
#   ddp_model = make_ddp(model)
)PY" + job.usage +
         R"PY(#   ... train; at the end, on every rank: finish()
# To check this file on this machine (2 ranks, CPU or GPUs):
#   )PY" + check_command(job.file) + R"PY(


if __name__ == "__main__":
    try:
        check_here()
    except BaseException:  # exit without the teardown that can abort after Python hooks ran
        import os
        import traceback
        traceback.print_exc()
        os._exit(1)
)PY";
}

std::string gloo_bf16_source() {
  return R"PY(# PyTorch's bf16 hooks under other names: DDP refuses functions named
# bf16_compress_hook or bf16_compress_wrapper_hook where PyTorch has no NCCL
# (the CPU-only wheels), though Gloo sums bf16 (PyTorch 2.x).
def gloo_bf16_compress_hook(state, bucket):
    """PyTorch's bf16_compress_hook."""
    return default_hooks.bf16_compress_hook(state, bucket)


def gloo_bf16_compress_wrapper(hook):
    """PyTorch's bf16_compress_wrapper(hook)."""
    wrapped = default_hooks.bf16_compress_wrapper(hook)

    def gloo_bf16_wrapper_hook(state, bucket):
        return wrapped(state, bucket)
    return gloo_bf16_wrapper_hook


)PY";
}

}  // namespace commtune

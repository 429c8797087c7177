"""Replays a commtune run in plain PyTorch DDP: the reference oracle.

The models below mirror commtune's built-ins parameter for parameter and op
for op, and the synthetic datasets draw the same tensors with the same
generator calls, so a run replayed from commtune's initial weights
(weights.save_initial) sees the same numbers as commtune did.

    .venv/bin/python commtune_reference.py --config summary.json --init init.pt --out ref.json

--config takes commtune's normalised configuration (the "config" of a run
summary, or a summary itself). The output holds every rank's loss per step.
"""
import argparse
import ctypes
import json
import math
import os
import socket
import sys
import tempfile
import time
from collections import OrderedDict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks, default_hooks, post_localSGD_hook, powerSGD_hook
from torch.distributed.algorithms.model_averaging import averagers, hierarchical_model_averager
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


# --- models (names and arithmetic as in core/engine/models/*.cpp) -----------------

class MLP(nn.Module):
    def __init__(self, inputs, hidden, layers, outputs):
        super().__init__()
        self.hidden = nn.ModuleList()
        width = inputs
        for _ in range(layers):
            self.hidden.append(nn.Linear(width, hidden))
            width = hidden
        self.output = nn.Linear(width, outputs)

    def forward(self, x):
        x = x.flatten(1)
        for layer in self.hidden:
            x = layer(x).relu_()
        return self.output(x)


class CNN(nn.Module):
    def __init__(self, shape, width, hidden, classes):
        super().__init__()
        channels, height, w = shape
        self.conv1 = nn.Conv2d(channels, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc1 = nn.Linear(2 * width * (height // 4) * (w // 4), hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x).relu_(), 2)
        x = F.max_pool2d(self.conv2(x).relu_(), 2)
        return self.fc2(self.fc1(x.flatten(1)).relu_())


class Block(nn.Module):
    def __init__(self, d, heads, mlp_ratio):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, mlp_ratio * d)
        self.fc2 = nn.Linear(mlp_ratio * d, d)

    def forward(self, x, mask):
        batch, time, d = x.shape
        head_dim = d // self.heads
        qkv = self.qkv(self.ln1(x)).view(batch, time, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)).mul(1.0 / math.sqrt(head_dim))
        attention = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
        y = torch.matmul(attention, v).transpose(1, 2).reshape(batch, time, d)
        h = x + self.proj(y)
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))


class TransformerLM(nn.Module):
    def __init__(self, vocab, seq_len, d_model, heads, layers, mlp_ratio):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        self.blocks = nn.ModuleList([Block(d_model, heads, mlp_ratio) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids):
        time = ids.size(1)
        mask = torch.ones(time, time, dtype=torch.bool, device=ids.device).triu(1)
        x = self.tok_emb(ids) + self.pos_emb.narrow(0, 0, time)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))


def make_model(cfg, spec):
    name = cfg["name"]
    if name == "mlp":
        inputs = math.prod(spec["input_shape"])
        return MLP(inputs, cfg["hidden"], cfg["layers"], spec["classes"])
    if name == "cnn":
        return CNN(spec["input_shape"], cfg["width"], cfg["hidden"], spec["classes"])
    if name == "transformer_lm":
        return TransformerLM(spec["classes"], spec["input_shape"][0], cfg["d_model"], cfg["heads"], cfg["layers"],
                             cfg["mlp_ratio"])
    if name == "torchscript":
        return torch.jit.load(cfg["path"])
    raise ValueError(f"no reference for model {name}")


# --- data (the same generator calls as core/engine/data/*.cpp) --------------------

def make_dataset(cfg, seed):
    """Returns (inputs, targets, spec)."""
    name = cfg["name"]
    g = torch.Generator().manual_seed(seed)
    if name == "synthetic":
        x = torch.randn(cfg["samples"], cfg["features"], generator=g)
        teacher = torch.randn(cfg["features"], cfg["classes"], generator=g)
        return x, x.matmul(teacher).argmax(1), {"input_shape": [cfg["features"]], "classes": cfg["classes"]}
    if name == "synthetic_images":
        c, s = cfg["channels"], cfg["size"]
        x = torch.randn(cfg["samples"], c, s, s, generator=g)
        teacher = torch.randn(c * (s // 4) * (s // 4), cfg["classes"], generator=g)
        y = F.avg_pool2d(x, 4).flatten(1).matmul(teacher).argmax(1)
        return x, y, {"input_shape": [c, s, s], "classes": cfg["classes"]}
    if name == "synthetic_tokens":
        vocab, length, n = cfg["vocab"], cfg["seq_len"], cfg["samples"]
        transition = torch.softmax(torch.randn(vocab, vocab, generator=g).mul_(3.0), 1)
        tokens = torch.empty(n, length + 1, dtype=torch.long)
        current = torch.randint(vocab, (n,), generator=g)
        tokens[:, 0] = current
        for t in range(1, length + 1):
            current = torch.multinomial(transition.index_select(0, current), 1, True, generator=g).squeeze(1)
            tokens[:, t] = current
        return (tokens[:, :length].contiguous(), tokens[:, 1:].contiguous(),
                {"input_shape": [length], "classes": vocab})
    if name == "mnist":
        prefix = "train" if cfg["split"] == "train" else "t10k"
        images = read_idx(os.path.join(cfg["path"], f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(os.path.join(cfg["path"], f"{prefix}-labels-idx1-ubyte"))
        if cfg["limit"] > 0:
            images, labels = images[:cfg["limit"]], labels[:cfg["limit"]]
        x = images.unsqueeze(1).to(torch.float).div_(255.0)
        if cfg["normalize"]:
            x.sub_(0.1307).div_(0.3081)
        return x.contiguous(), labels.long(), {"input_shape": [1, images.size(1), images.size(2)], "classes": 10}
    if name == "cifar10":
        files = ["test_batch.bin"] if cfg["split"] == "test" else [
            f"data_batch_{i}.bin" for i in range(1, 6) if i == 1 or os.path.exists(os.path.join(cfg["path"], f"data_batch_{i}.bin"))]
        raw = b"".join(open(os.path.join(cfg["path"], f), "rb").read() for f in files)
        records = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(-1, 3073)
        if cfg["limit"] > 0:
            records = records[:cfg["limit"]]
        y = records[:, 0].long()
        x = records[:, 1:].reshape(-1, 3, 32, 32).to(torch.float).div_(255.0)
        if cfg["normalize"]:
            x.sub_(torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1))
            x.div_(torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1))
        return x.contiguous(), y, {"input_shape": [3, 32, 32], "classes": 10}
    if name == "tensors":
        x, y = read_user_tensors(cfg)
        if cfg["limit"] > 0:
            x, y = x[:cfg["limit"]], y[:cfg["limit"]]
        tokens = not x.is_floating_point()
        x = x.long() if tokens else x.float().contiguous()
        y = y.long()
        largest = int(y.max())
        if tokens and y.dim() == 2:
            largest = max(largest, int(x.max()))
        return x, y, {"input_shape": list(x.shape[1:]), "classes": cfg["classes"] or largest + 1}
    raise ValueError(f"no reference for dataset {name}")


def read_user_tensors(cfg):
    """The inputs and labels of the "tensors" dataset, read with numpy and torch's own readers
    (safetensors' header by hand: the format is 8 bytes of header length, a JSON header, the data)."""
    import numpy as np
    path, keys = cfg["path"], (cfg["inputs"], cfg["targets"])
    if os.path.isdir(path):
        return [torch.from_numpy(np.load(os.path.join(path, k + ".npy"))) for k in keys]
    with open(path, "rb") as f:
        raw = f.read()
    if raw.startswith(b"PK"):
        d = torch.load(path, weights_only=True)
        return [d[k] for k in keys]
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    types = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
             "BOOL": torch.bool}
    out = []
    for k in keys:
        begin, end = header[k]["data_offsets"]
        data = bytearray(raw[8 + n + begin:8 + n + end])
        out.append(torch.frombuffer(data, dtype=types[header[k]["dtype"]]).view(header[k]["shape"]))
    return out


def read_idx(path):
    data = open(path, "rb").read()
    rank = data[3]
    sizes = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank)]
    return torch.frombuffer(bytearray(data[4 + 4 * rank:]), dtype=torch.uint8).view(*sizes)


def loss_fn(logits, target):
    if logits.dim() == 3:
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1))
    return F.cross_entropy(logits, target)


# --- hooks -------------------------------------------------------------------

def make_hook(cfg):
    """Returns (state, hook) or None for "none": PyTorch's own hooks (on Gloo too: PyTorch 2.x's
    Gloo sums bf16, which 1.13's could not)."""
    name = cfg["name"]
    hooks = {
        "allreduce": default_hooks.allreduce_hook,
        "fp16_compress": default_hooks.fp16_compress_hook,
        "bf16_compress": default_hooks.bf16_compress_hook,
        "noop": debugging_hooks.noop_hook,
    }
    if name == "none":
        if cfg.get("wrapper", "none") != "none":
            raise ValueError("a wrapper needs a hook to wrap")
        return None
    state = None
    if name == "threshold_sparsify":
        hooks[name] = threshold_sparsify_hook(cfg["threshold"])
    if name == "post_local_sgd":
        size = cfg["subgroup_size"]
        subgroup = dist.group.WORLD
        if 0 < size < dist.get_world_size():
            subgroup, _ = dist.new_subgroups(group_size=size)
        state = post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=subgroup,
                                                     start_localSGD_iter=cfg["start_localSGD_iter"],
                                                     post_local_gradient_allreduce=cfg["post_local_gradient_allreduce"])
        hooks[name] = post_localSGD_hook.post_localSGD_hook
    if name in ("powersgd", "batched_powersgd"):
        state = powerSGD_hook.PowerSGDState(process_group=None, **{k: cfg[k] for k in POWERSGD_STATE_KEYS})
        hooks[name] = powerSGD_hook.powerSGD_hook if name == "powersgd" else powerSGD_hook.batched_powerSGD_hook
    if name not in hooks:
        raise ValueError(f"no reference for hook {name}")
    hook = hooks[name]
    wrapper = cfg.get("wrapper", "none")
    if wrapper == "fp16":
        hook = default_hooks.fp16_compress_wrapper(hook)
    elif wrapper == "bf16":
        hook = default_hooks.bf16_compress_wrapper(hook)
    return state, hook


def threshold_sparsify_hook(threshold):
    """The example plugin's hook (plugins/examples/threshold_sparsify.cpp) in PyTorch."""
    def hook(state, bucket):
        tensor = bucket.buffer()
        tensor.masked_fill_(tensor.abs() < threshold, 0).div_(dist.get_world_size())
        return dist.all_reduce(tensor, async_op=True).get_future().then(lambda fut: fut.value()[0])
    return hook


def make_averager(cfg):
    """The model averager a hook runs after the optimizer, or None."""
    if cfg["name"] != "post_local_sgd":
        return None
    if cfg["hierarchy"]:  # "period:group size,...", the whole world last
        levels = (item.split(":") for item in cfg["hierarchy"].split(","))
        return hierarchical_model_averager.HierarchicalModelAverager(
            OrderedDict((int(period), int(size)) for period, size in levels), warmup_steps=cfg["warmup_steps"])
    return averagers.PeriodicModelAverager(period=cfg["period"], warmup_steps=cfg["warmup_steps"])


POWERSGD_STATE_KEYS = ("matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate",
                       "use_error_feedback", "warm_start", "orthogonalization_epsilon", "random_seed",
                       "compression_stats_logging_frequency", "batch_tensors_with_same_shape")


# --- timing a Python hook (benchmarks) -----------------------------------------

class HookClock:
    """CPU seconds spent in a hook and in the callbacks chained on its
    collectives' futures (they run on Gloo's threads); a thread blocked on a
    collective uses none, as in commtune's hook timing."""

    def __init__(self):
        import threading
        self.lock = threading.Lock()
        self.seconds = 0.0

    def add(self, seconds):
        with self.lock:
            self.seconds += seconds

    def take(self):
        with self.lock:
            seconds, self.seconds = self.seconds, 0.0
        return seconds

    def timed(self, fn):
        def run(*args):
            started = time.thread_time()
            try:
                return fn(*args)
            finally:
                self.add(time.thread_time() - started)
        return run


class _FutureProxy:
    def __init__(self, future, clock):
        self.future, self.clock = future, clock

    def then(self, callback):
        return _FutureProxy(self.future.then(self.clock.timed(callback)), self.clock)

    def wait(self):
        return self.future.wait()

    def value(self):
        return self.future.value()


class _WorkProxy:
    def __init__(self, work, clock):
        self.work, self.clock = work, clock

    def get_future(self):
        return _FutureProxy(self.work.get_future(), self.clock)

    def wait(self):
        return self.work.wait()


def timed_hook(hook, clock):
    """Wraps a hook so that it and every callback chained on its all_reduce futures count into `clock`."""
    original = dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        work = original(tensor, *args, **kwargs)
        return _WorkProxy(work, clock) if kwargs.get("async_op") else work

    dist.all_reduce = all_reduce  # the hooks look it up on the module at call time

    def run(state, bucket):
        started = time.thread_time()
        future = hook(state, bucket)
        clock.add(time.thread_time() - started)
        return future.future if isinstance(future, _FutureProxy) else future
    return run


# --- the run -------------------------------------------------------------------

def make_optimizer(cfg, params):
    if cfg["name"] == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"], dampening=cfg["dampening"],
                               weight_decay=cfg["weight_decay"], nesterov=cfg["nesterov"])
    if cfg["name"] == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
                                weight_decay=cfg["weight_decay"])
    raise ValueError(f"no reference for optimizer {cfg['name']}")


def batches(sampler, x, y, batch_size, drop_last):
    """What DataLoader(batch_size, sampler, drop_last) yields, by index_select
    (the same samples in the same order, without per-sample Python calls)."""
    indices = list(sampler)
    for start in range(0, len(indices), batch_size):
        chunk = indices[start:start + batch_size]
        if drop_last and len(chunk) < batch_size:
            return
        index = torch.tensor(chunk)
        yield x.index_select(0, index), y.index_select(0, index)


def load_initial_weights(model, path):
    """commtune's initial weights (weights.save_initial: its trainable parameters, each tensor once)
    into the model. What they leave out must be a buffer or a tied weight's second name."""
    result = model.load_state_dict(torch.load(path), strict=False)
    parameters = dict(model.named_parameters())  # each tensor once, under its first name
    if result.unexpected_keys or any(name in parameters for name in result.missing_keys):
        raise ValueError(f"{path} does not fit the model: {result}")


def ddp_bucket_caps(ddp):
    """DDP's keyword arguments for the run's bucket caps. DDP reads the first bucket's cap from
    a module global: 1.13 always, 2.x only without bucket_cap_mb (given, it caps every bucket)."""
    first, cap = int(ddp["first_bucket_cap_mb"] * 2**20), ddp["bucket_cap_mb"]
    dist._DEFAULT_FIRST_BUCKET_BYTES = first
    if int(torch.__version__.split(".")[0]) < 2 or first == int(cap * 2**20):
        return {"bucket_cap_mb": cap}
    if cap == 25:  # DDP's default
        return {}
    raise ValueError(f"PyTorch {torch.__version__}'s DDP cannot cap the first bucket at {first} bytes and the "
                     f"others at {cap} MiB")


def pin_to_share_of_cores(rank, world):
    """Binds this rank to its share of the allowed cores, as commtune's launcher does."""
    cores = sorted(os.sched_getaffinity(0))
    share = len(cores) // world
    if share:
        os.sched_setaffinity(0, cores[rank * share:(rank + 1) * share])


def set_blas_threads(threads):
    """Bounds OpenBLAS's pool as commtune's `threads` does. A forked rank
    inherits the pool its parent sized from OPENBLAS_NUM_THREADS at import."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libopenblas"):
                ctypes.CDLL(path).openblas_set_num_threads(threads)
                return


def exported_module(path):
    """A Python file `commtune-cli export` wrote, imported unmodified."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exported_hook(state_path, rank):
    """The state and registration of `commtune-cli export powersgd`, through the
    exported snippet itself (use_powersgd.py beside the state file)."""
    snippet = exported_module(os.path.join(os.path.dirname(os.path.abspath(state_path)), "use_powersgd.py"))
    state, document = snippet.load_powersgd_state(state_path.replace("{rank}", str(rank)))
    return snippet, state, document


def load_commtune_checkpoint(folder, rank, model, optimizer):
    """A commtune checkpoint's weights and optimizer state in the PyTorch model
    and optimizer, by parameter name as a user would load them; returns the
    step it continues from."""
    ck = torch.load(os.path.join(folder, f"rank-{rank}.pt"), weights_only=True)
    kinds = {key for state in ck["optimizer_state"].values() for key in state}
    if kinds - {"momentum_buffer"}:
        raise ValueError(f"no reference resume for optimizer state {sorted(kinds)}")
    model.load_state_dict(ck["model"])
    for name, p in model.named_parameters():
        optimizer.state[p] = {key: value.clone().to(p.device) for key, value in ck["optimizer_state"][name].items()}
    return ck["step"]


def run_rank(rank, world, port, config, init_path, out_dir, final_path, dump_dir=None, powersgd_state=None,
             time_hook=False, resume_folder=None, exported_file=None):
    if os.environ.get("COMMTUNE_REFERENCE_PIN") == "1":  # benchmarks: the same placement as commtune
        pin_to_share_of_cores(rank, world)
    threads = config["threads"] or max(1, (os.cpu_count() or 1) // world)
    torch.set_num_threads(threads)
    set_blas_threads(threads)
    on_cuda = config["device"] == "cuda" or (config["device"] == "auto" and torch.cuda.is_available())
    if config.get("deterministic"):  # as commtune's deterministic=true sets it, before cuBLAS starts
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    # As commtune places ranks: one GPU each under NCCL, round-robin under Gloo (backend=gloo shares GPUs).
    gloo = config.get("backend", "auto") == "gloo" or not on_cuda
    device = torch.device("cuda", rank % torch.cuda.device_count()) if on_cuda else torch.device("cpu")
    if on_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("gloo" if gloo else "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=config["timeout_s"]))
    x, y, spec = make_dataset(config["data"], config["seed"])
    model = make_model(config["model"], spec)
    load_initial_weights(model, init_path)
    model.to(device)
    bucket_caps = ddp_bucket_caps(config["ddp"])
    exported = None
    if powersgd_state:  # everything through the exported file, as a production job would use it
        snippet, state, document = exported_hook(powersgd_state, rank)
        ddp = snippet.make_ddp(model)
        snippet.register(ddp, state)
        exported = (snippet, state, document)
    elif exported_file:  # use_hook.py, use_byteps.py: make_ddp and register as a production job calls them
        snippet = exported_module(exported_file)
        ddp = snippet.make_ddp(model)
        exported = (snippet, snippet.register(ddp), {})
    else:
        ddp = DDP(model, device_ids=[device.index] if on_cuda else None, **bucket_caps)
        hook = make_hook(config["hook"])
        if hook is not None:
            state, function = hook
            if time_hook:
                hook_clock = HookClock()
                function = timed_hook(function, hook_clock)
            ddp.register_comm_hook(state, function)
    averager = make_averager(config["hook"])
    hook_seconds = []
    data = config["data"]
    sampler = DistributedSampler(range(x.size(0)), num_replicas=world, rank=rank, shuffle=data["shuffle"],
                                 seed=config["seed"])
    opt_cfg = config["optimizer"]
    optimizer = make_optimizer(opt_cfg, ddp.parameters())
    scheduler = None
    if opt_cfg["warmup_steps"] > 0:
        warmup = opt_cfg["warmup_steps"]
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda t: min(1.0, (t + 1) / warmup))
    if exported and hasattr(exported[1], "follow"):  # use_byteps.py: error feedback reads the learning rate
        exported[1].follow(optimizer)
    first_step = 0
    if resume_folder and exported:  # the exported file's own loaders, as the production job would call them
        checkpoint = os.path.join(resume_folder, f"rank-{rank}.pt")
        first_step = exported[0].load_checkpoint(model, optimizer, checkpoint)
        if hasattr(exported[0], "load_hook_memories"):
            exported[0].load_hook_memories(exported[1], checkpoint)
    elif resume_folder:
        first_step = load_commtune_checkpoint(resume_folder, rank, model, optimizer)
    losses, seconds, step, epoch = [], [], 0, 0
    while step < config["steps"]:
        sampler.set_epoch(epoch)
        started = time.perf_counter()
        for inputs, targets in batches(sampler, x, y, data["batch_size"], data["drop_last"]):
            if step >= config["steps"]:
                break
            if step < first_step:  # done before the checkpoint: only the data order and the schedule advance
                if scheduler is not None:
                    scheduler.step()
                step += 1
                continue
            if exported and step == first_step and "runtime" in exported[2]:
                exported[0].resume(ddp, exported[1], exported[2],
                                   lambda: loss_fn(ddp(inputs.to(device)), targets.to(device)).backward())
            loss = loss_fn(ddp(inputs.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            if dump_dir and step < config["debug"]["dump_grads_steps"]:
                torch.save({"reduced/" + n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()},
                           os.path.join(dump_dir, f"grads-rank{rank}-step{step}.pt"))
            optimizer.step()
            if averager is not None:
                averager.average_parameters(ddp.parameters())
            if scheduler is not None:
                scheduler.step()
            losses.append(loss.item())
            if time_hook:
                hook_seconds.append(hook_clock.take())
            now = time.perf_counter()
            seconds.append(now - started)  # the whole step: batch, forward, backward, optimizer
            started = now
            step += 1
        epoch += 1
    result = {"losses": losses, "seconds": seconds}
    if time_hook:
        result["hook_seconds"] = hook_seconds
    if exported and hasattr(exported[1], "error_dict"):  # PowerSGD
        result["powersgd_iter"] = exported[1].iter
        result["powersgd_buckets_with_error"] = sorted(exported[1].error_dict)
    with open(os.path.join(out_dir, f"losses-{rank}.json"), "w") as f:
        json.dump(result, f)
    if rank == 0 and final_path:  # the trainable parameters, each once, as commtune's weights.save_final
        torch.save({k: v.detach().cpu().clone() for k, v in model.named_parameters()}, final_path)
    dist.barrier()  # every rank's results are on disk
    # PyTorch (1.13, and 2.11 still) sometimes deadlocks or aborts tearing down a process whose Gloo
    # threads ran Python hook callbacks (seen here: one rank gone, the other
    # waiting for the GIL forever). The work is done; leave without teardown.
    sys.stdout.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replay(config, init_path, final_path=None, world_size=None, dump_dir=None, powersgd_state=None, time_hook=False,
           resume_folder=None, exported_file=None):
    """Runs the reference; returns per rank {"losses": [...], "seconds": [...]}.
    With dump_dir, the first debug.dump_grads_steps steps' reduced gradients
    are saved there as commtune saves them."""
    world = world_size or config["world_size"] or 2
    # Like commtune's `threads`, bound the BLAS pool too (read by each spawned rank at import).
    threads = config["threads"] or max(1, (os.cpu_count() or 1) // world)
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    # MKL's reproducible mode, as commtune's workers set it (MKL reads it when it starts, at a rank's first op).
    os.environ.setdefault("MKL_CBWR", "AUTO")
    # On the CPU each rank is a fork of this process, which has imported torch
    # and run no ATen op (libgomp's pool does not survive a fork): a spawned
    # rank imports torch again, a second per rank. CUDA cannot be forked into.
    on_cpu = torch.version.cuda is None or config["device"] == "cpu"
    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(run_rank, args=(world, free_port(), config, init_path, out_dir, final_path, dump_dir,
                                           powersgd_state, time_hook, resume_folder, exported_file),
                           nprocs=world, join=True, start_method="fork" if on_cpu else "spawn")
        results = []
        for r in range(world):
            with open(os.path.join(out_dir, f"losses-{r}.json")) as f:
                results.append(json.load(f))
        return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="normalised config, or a commtune run summary")
    parser.add_argument("--init", required=True, help="initial weights (commtune's weights.save_initial)")
    parser.add_argument("--out", required=True,
                        help="where to write {'losses': [[rank 0], ...], 'seconds': [[rank 0], ...]}")
    parser.add_argument("--final", help="also save rank 0's final weights here")
    parser.add_argument("--world-size", type=int, help="ranks (default: the config's, or 2)")
    parser.add_argument("--dump-grads", help="save the reduced gradients of the first debug.dump_grads_steps steps here")
    parser.add_argument("--time-hook", action="store_true",
                        help="record each step's hook CPU time (the hook and its callbacks), as commtune does")
    parser.add_argument("--powersgd-state", help="use this exported PowerSGD state ({rank} is replaced) and its "
                                                 "use_powersgd.py instead of the config's hook")
    parser.add_argument("--exported", help="use this exported use_hook.py (make_ddp, register) instead of the "
                                           "config's hook")
    parser.add_argument("--resume", help="continue from this commtune checkpoint folder (its weights, optimizer "
                                         "state and step); --init still builds the model first")
    args = parser.parse_args()
    config = json.load(open(args.config))
    config = config.get("config", config)
    ranks = replay(config, args.init, args.final, args.world_size, args.dump_grads, args.powersgd_state,
                   args.time_hook, args.resume, args.exported)
    with open(args.out, "w") as f:
        json.dump({"losses": [r["losses"] for r in ranks], "seconds": [r["seconds"] for r in ranks],
                   "ranks": ranks}, f)


if __name__ == "__main__":
    sys.exit(main())

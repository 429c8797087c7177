"""One rank of a script trial: the hook registered, the step measured, the events written.

A step's phases are wall-clock intervals between six moments this module can see from Python:
the previous log() (A), the forward's start (B), the backward's start (C: the first gradient
reaching the model's output), the end of the backward's own work (D: a callback autograd runs
when its graph is done), the optimizer step's start (E) and log() (G):

    t_data = B - A    t_forward = C - B (forward and loss)    t_backward = D - C
    t_comm_wait = E - D (DDP waiting for the last buckets' reductions)    t_optimizer = G - E

so they add up to t_total = G - A, as the engine's do. On a GPU these are the host's times: CUDA
runs kernels after the host has queued them, so the split is of when the host waited, and the
GPU's work lands where the host first waits for it (reading the loss, in t_optimizer). The total
holds either way. t_hook is the CPU time of the hook's own call on the thread that ran it; work
its futures' callbacks do later is not counted.
"""
import json
import math
import os
import re
import threading
import time

import torch
import torch.distributed as dist

from . import _events, _hooks

MAX_CONFIG_BYTES = 4 << 20
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_to_all_single", "broadcast", "reduce",
               "reduce_scatter_tensor")
# The network model's collective kinds (core/tuner/netmodel/network.h). A reduce-scatter costs
# what a ring alltoall does, (p-1) latencies and (p-1)/p of its input, so it is counted as one.
KIND = {"all_reduce": "allreduce", "all_gather": "allgather", "all_gather_into_tensor": "allgather",
        "all_to_all_single": "alltoall", "broadcast": "broadcast", "reduce": "reduce",
        "reduce_scatter_tensor": "alltoall"}


class Diverged(RuntimeError):
    """A non-finite loss: the trial's result is that it diverged."""


def read_config(path):
    """The trial's configuration, as the tuner wrote it (a regular file, bounded before it is read)."""
    if not os.path.isfile(path):
        raise _hooks.SettingError(f"COMMTUNE_TRIAL_CONFIG: {path} is not a regular file")
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        raise _hooks.SettingError(f"COMMTUNE_TRIAL_CONFIG: {path} is {size} bytes, over {MAX_CONFIG_BYTES}")
    with open(path, "rb") as f:
        text = f.read(MAX_CONFIG_BYTES + 1)

    def no_constant(name):  # Python's json takes NaN and Infinity, which JSON has not
        raise _hooks.SettingError(f"COMMTUNE_TRIAL_CONFIG: {path} holds {name}, which is not JSON")

    def no_repeats(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise _hooks.SettingError(f"COMMTUNE_TRIAL_CONFIG: {path} repeats a key in an object")
        return dict(pairs)
    try:
        config = json.loads(text, object_pairs_hook=no_repeats, parse_constant=no_constant)
    except ValueError as e:
        raise _hooks.SettingError(f"COMMTUNE_TRIAL_CONFIG: {path} is not JSON ({e})") from None
    if not isinstance(config, dict):
        raise _hooks.SettingError(f"COMMTUNE_TRIAL_CONFIG: {path} is not a JSON object")
    return config


def _wire_bytes(kind, tensor_bytes, world):
    """What this rank sends under the bandwidth-optimal algorithms (docs/events.md)."""
    if world <= 1:
        return 0
    if kind == "allreduce":
        return 2 * (world - 1) * tensor_bytes // world
    if kind == "allgather":
        return (world - 1) * tensor_bytes
    return (world - 1) * tensor_bytes // world


def _bytes_of(value):
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_bytes_of(v) for v in value)
    return 0


def _first_grad_tensor(value):
    """A tensor of the forward's output that the backward passes through (outputs may be tuples,
    dicts or Hugging Face's ModelOutput, an OrderedDict)."""
    if isinstance(value, torch.Tensor):
        return value if value.requires_grad else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = _first_grad_tensor(item)
        if found is not None:
            return found
    return None


# What a rank's exception says when the rank did nothing wrong itself: a peer went away or stopped
# answering (Gloo's and NCCL's words). The tuner blames the rank whose own error came first.
_PEER_GONE = re.compile(r"Connection (closed|reset) by peer|Broken pipe|ProcessGroup\w* .*(timed out|Timeout)|"
                        r"NCCL communicator was aborted|DistNetworkError|Socket Timeout", re.IGNORECASE)


def _error_kind_and_line(error):
    """(communication or runtime, the exception's type and first line) for a rank's error event."""
    if not isinstance(error, BaseException):
        return "runtime", str(error)
    lines = [line for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    network = tuple(getattr(dist, name) for name in ("DistNetworkError",) if hasattr(dist, name))
    peer_gone = (network and isinstance(error, network)) or _PEER_GONE.search(str(error))
    return ("communication" if peer_gone else "runtime"), text


class Trial:
    def __init__(self, ddp_model, optimizer, config, event_template):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.optimizer = optimizer
        self.on_nonfinite = config.get("on_nonfinite", "stop")
        self.events = _events.EventFile(_events.event_path(event_template, self.rank), self.rank, self.world)
        self._began = time.perf_counter()
        self._lock = threading.Lock()
        self._current_bucket = threading.local()
        self._step = 0
        self._failed = False
        self._losses = []
        module = ddp_model.module
        self._names = {id(p): name for name, p in module.named_parameters()}
        self._reset(time.perf_counter())
        try:
            self.registered = _hooks.register(ddp_model, config.get("hook", {}), self._measured)
        except Exception as e:
            self.events.message("error", rank=self.rank, error_kind="config", message=str(e))
            self.events.close()
            raise
        self.model = self.registered.model
        if self.registered.follow is not None and optimizer is not None:
            self.registered.follow(optimizer)
        # What a plain float32 ring allreduce of every gradient sends: the reference of the
        # compression ratio. DDP's built-in reduction (no hook) is that allreduce, in C++ where no
        # Python sees it, so its bytes are these.
        grads = sum(p.numel() * 4 for p in module.parameters() if p.requires_grad)
        self._reference_bytes = _wire_bytes("allreduce", grads, self.world)
        self._builtin_bytes = self._reference_bytes if self.registered.hook is None else 0
        self._instrument()
        self._count_collectives()
        params = [(name, list(p.shape)) for name, p in module.named_parameters() if p.requires_grad]
        self.events.message(
            "run_start", rank=self.rank, world_size=self.world, local_rank=int(os.environ.get("LOCAL_RANK", 0)),
            device=str(next(module.parameters()).device), backend=dist.get_backend(),
            threads=torch.get_num_threads(), torch_version=torch.__version__,
            parameter_count=sum(p.numel() for p in module.parameters() if p.requires_grad),
            parameters=[{"name": n, "shape": s} for n, s in params], config=config)

    # -- the step's moments ------------------------------------------------------------------

    def _reset(self, now):
        self._start = now
        self._forward = self._backward = self._backward_done = self._optimizer = None
        self._hook_cpu = 0.0
        self._wire = 0
        self._stats = {}  # (bucket or None, name) -> value
        self._buckets = {}

    def _instrument(self):
        def forward_pre(module, args):
            if self._forward is None:
                self._forward = time.perf_counter()

        def forward_post(module, args, output):
            tensor = _first_grad_tensor(output)
            if tensor is not None:
                tensor.register_hook(self._backward_started)
        self.model.register_forward_pre_hook(forward_pre)
        self.model.register_forward_hook(forward_post)
        if self.optimizer is not None:
            self.optimizer.register_step_pre_hook(lambda opt, args, kwargs: self._optimizer_started())
            self.optimizer.register_step_post_hook(lambda opt, args, kwargs: self._optimizer_done())

    def _backward_started(self, grad):
        if self._backward is None:
            self._backward = time.perf_counter()
            torch.autograd.Variable._execution_engine.queue_callback(self._backward_finished)
        return grad

    def _backward_finished(self):
        self._backward_done = time.perf_counter()

    def _optimizer_started(self):
        if self._optimizer is None:
            self._optimizer = time.perf_counter()

    def _optimizer_done(self):
        if self.registered.after_step is not None:
            self.registered.after_step(self.optimizer)

    def _measured(self, function):
        """The hook, reporting each bucket's readiness and layout and its own CPU time."""
        def hook(state, bucket):
            now = time.perf_counter()
            index = bucket.index()
            buffer = bucket.buffer()
            started = self._backward if self._backward is not None else now
            with self._lock:
                self._stats[(index, "ready_s")] = now - started
                if self._step <= 1:
                    self._buckets[index] = {
                        "index": index, "numel": buffer.numel(), "bytes": buffer.numel() * buffer.element_size(),
                        "parameters": [self._names.get(id(p), "?") for p in bucket.parameters()]}
            cpu = time.thread_time()
            self._current_bucket.index = index
            try:
                return function(state, bucket)
            finally:
                self._current_bucket.index = None
                self._hook_cpu += time.thread_time() - cpu
        return hook

    def _count_collectives(self):
        """Every collective's bytes, calls and time, under the bucket whose hook call issued it,
        or for the whole step when none did (a future's callback, an averager)."""
        for name in COLLECTIVES:
            original = getattr(dist, name, None)
            if original is None:
                continue
            setattr(dist, name, self._counted(original, KIND[name]))

    def _counted(self, original, kind):
        takes_input_second = kind in ("allgather", "alltoall")

        def counted(*args, **kwargs):
            issued = time.perf_counter()
            bucket = getattr(self._current_bucket, "index", None)
            position = 1 if takes_input_second else 0
            tensor = args[position] if len(args) > position else next(
                (kwargs[k] for k in ("tensor", "input_tensor", "input") if k in kwargs), None)
            group = kwargs.get("group")
            world = dist.get_world_size(group) if group is not None else self.world
            # As the engine's ledger: a collective's statistic is its payload (the input, for a
            # gather), which the network model prices; the step's wire bytes are what the ring sends.
            payload = _bytes_of(tensor)
            sent = _wire_bytes(kind, payload, world)
            key = f"comm.{kind}" + ("" if world == self.world else f"@{world}x1")
            work = original(*args, **kwargs)

            def record(seconds):
                with self._lock:
                    for field, value in (("bytes", payload), ("calls", 1), ("seconds", seconds)):
                        at = (bucket, f"{key}.{field}")
                        self._stats[at] = self._stats.get(at, 0.0) + value
                    self._wire += sent
            if kwargs.get("async_op") and work is not None:
                work.get_future().add_done_callback(lambda _: record(time.perf_counter() - issued))
            else:
                record(time.perf_counter() - issued)
            return work
        return counted

    # -- log() --------------------------------------------------------------------------------

    def log(self, loss):
        value = float(loss.detach().float().item()) if isinstance(loss, torch.Tensor) else float(loss)
        now = time.perf_counter()
        start = self._start
        forward = self._forward if self._forward is not None else start
        backward = max(self._backward, forward) if self._backward is not None else forward
        done = max(self._backward_done, backward) if self._backward_done is not None else backward
        optimizer = max(self._optimizer, done) if self._optimizer is not None else now
        times = (forward - start, backward - forward, done - backward, optimizer - done, self._hook_cpu,
                 now - optimizer, now - start)
        lr = self.optimizer.param_groups[0]["lr"] if self.optimizer is not None else 0.0
        with self._lock:
            stats = sorted((name, v) for (b, name), v in self._stats.items() if b is None)
            buckets = sorted((b, name, v) for (b, name), v in self._stats.items() if b is not None)
            wire = self._wire + self._builtin_bytes
            uncompressed = self._reference_bytes
            layout = [self._buckets[i] for i in sorted(self._buckets)]
        if layout:
            self.events.message("buckets", step=self._step, buckets=layout)
        self.events.step(self._step, value, lr, times, wire, uncompressed, stats, buckets)
        self._losses.append(value)
        self._step += 1
        self._reset(time.perf_counter())
        if not math.isfinite(value) and self.on_nonfinite != "warn":
            message = f"rank {self.rank}: the loss is {value} at step {self._step - 1}"
            self.events.message("error", rank=self.rank, error_kind="diverged", message=message)
            self._failed = True
            raise Diverged(message)

    def finish(self, error=None):
        if self.events is None:
            return
        if error is not None:
            if not self._failed:  # a divergence has said so already
                kind, text = _error_kind_and_line(error)
                self.events.message("error", rank=self.rank, error_kind=kind, message=text[:4000])
        else:
            final = _events.finite_or_none(self._losses[-1]) if self._losses else None
            self.events.message("run_end", rank=self.rank, steps=self._step, final_loss=final,
                                wall_s=time.perf_counter() - self._began)
        self.events.close()
        self.events = None

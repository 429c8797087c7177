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
holds either way.

The hook's figures are the engine's (core/engine/train/trainer.cpp), in wall time: t_hook is its
calls (on the autograd thread, inside the backward: also stored as hook_inline_s) and its futures'
callbacks (on a thread of the process group); per bucket, ready_s (from C to the hook's call),
chain_s (from the call to its result being complete) and hook_work_s (its call and callbacks).
A link probe before the first step gives the network model this machine's bandwidth.
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


def probe_link(device, world):
    """This machine's link as the engine measures it before training (core/engine/train/trainer.cpp
    probe_link): a float32 allreduce of 64 KiB and of 4 MiB, the best of five timed tries each after
    one to warm up. None with one rank."""
    if world < 2:
        return None
    sizes, best, attempts = [], [], []
    for numel in (16384, 1048576):
        tensor = torch.zeros(numel, dtype=torch.float32, device=device)
        timed = []
        for attempt in range(6):
            started = time.perf_counter()
            dist.all_reduce(tensor)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if attempt > 0:
                timed.append(time.perf_counter() - started)
        sizes.append(4 * numel)
        best.append(min(timed))
        attempts.append(timed)
    return {"bytes": sizes, "seconds": best, "attempts": attempts}


# The bucket whose hook call (or whose hook's callback) this thread runs, if any.
_BUCKET = threading.local()


def _carry_bucket_into_callbacks():
    """A hook's later stages run in its futures' callbacks, on a thread of the process group
    (PowerSGD's allreduce of Q, its decompression): a callback chained while a bucket's hook call
    runs carries that bucket, so that its collectives count under the bucket as the engine's do.
    Patched once per process, on the class every future of PyTorch's is."""
    future_type = torch._C.Future
    if getattr(future_type.then, "_commtune", False):
        return
    original, current = future_type.then, _BUCKET

    def then(future, callback):
        index = getattr(current, "index", None)
        if index is None:
            return original(future, callback)
        trial = current.trial

        def in_bucket(fut):
            outer = getattr(current, "index", None), getattr(current, "trial", None)
            current.index, current.trial = index, trial
            began = time.perf_counter()
            try:
                return callback(fut)
            finally:
                if outer[0] is None:  # else it ran inside a hook call or callback, whose time holds it
                    trial._callback_ran(index, time.perf_counter() - began)
                current.index, current.trial = outer
        return original(future, in_bucket)
    then._commtune = True
    future_type.then = then


class Trial:
    def __init__(self, ddp_model, optimizer, config, event_template):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.optimizer = optimizer
        self.on_nonfinite = config.get("on_nonfinite", "stop")
        self.events = _events.EventFile(_events.event_path(event_template, self.rank), self.rank, self.world)
        self._began = time.perf_counter()
        self._lock = threading.Lock()
        self._current_bucket = _BUCKET
        self._step = 0
        # The trial's steps, when the launcher handed them to the script (script.steps_arg): its
        # run ends with the last of them, whatever the script does after its loop (PyTorch's
        # teardown can abort a rank after Python comm hooks, before any exit handler runs).
        script = config.get("script") if isinstance(config.get("script"), dict) else {}
        steps = config.get("steps")
        self._last_step = steps if script.get("steps_arg") and isinstance(steps, int) and steps > 0 else None
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
        device = next(module.parameters()).device
        link_probe = probe_link(device, self.world)  # before the counting: the probe is not the run's
        self._instrument()
        self._count_collectives()
        _carry_bucket_into_callbacks()
        params = [(name, list(p.shape)) for name, p in module.named_parameters() if p.requires_grad]
        self.events.message(
            "run_start", rank=self.rank, world_size=self.world, local_rank=int(os.environ.get("LOCAL_RANK", 0)),
            device=str(device), backend=dist.get_backend(),
            threads=torch.get_num_threads(), torch_version=torch.__version__,
            parameter_count=sum(p.numel() for p in module.parameters() if p.requires_grad),
            parameters=[{"name": n, "shape": s} for n, s in params], config=config,
            # PyTorch's hooks return futures and never wait on their collectives themselves, so
            # several buckets' collectives are in flight at once (the network model's async case).
            hook_blocking=False, link_probe=link_probe)

    # -- the step's moments ------------------------------------------------------------------

    def _reset(self, now):
        self._start = now
        self._forward = self._backward = self._backward_done = self._optimizer = None
        self._hook_inline = self._hook_callbacks = 0.0  # the hook's calls; its futures' callbacks
        self._bucket_callbacks = {}
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
        """The hook, reporting each bucket's readiness, layout and chain, and the hook's own time."""
        def hook(state, bucket):
            now = time.perf_counter()
            index = bucket.index()
            buffer = bucket.buffer()
            started = self._backward if self._backward is not None else now
            with self._lock:
                self._stats[(index, "ready_s")] = now - started
                self._bucket_callbacks[index] = 0.0
                if self._step <= 1:
                    self._buckets[index] = {
                        "index": index, "numel": buffer.numel(), "bytes": buffer.numel() * buffer.element_size(),
                        "parameters": [self._names.get(id(p), "?") for p in bucket.parameters()]}
            self._current_bucket.index, self._current_bucket.trial = index, self
            try:
                future = function(state, bucket)
            finally:
                self._current_bucket.index = self._current_bucket.trial = None
                # DDP calls the hook on the autograd thread, inside the backward: all of its call is inline.
                call = time.perf_counter() - now
                with self._lock:
                    self._hook_inline += call

            # The bucket's chain, as the engine's: from the hook's call to its result being
            # complete, and the hook's own work in it (its call and its futures' callbacks, the
            # collectives they wait for included). Chained, not a done-callback: DDP waits on what
            # the hook returns, so the bucket's figures are in before the step can end.
            def done(fut):
                with self._lock:
                    self._stats[(index, "chain_s")] = time.perf_counter() - now
                    self._stats[(index, "hook_work_s")] = call + self._bucket_callbacks.get(index, 0.0)
                return fut.value()
            return future.then(done)
        return hook

    def _callback_ran(self, index, seconds):
        """A callback of bucket `index`'s hook ran for `seconds` (on a thread of the process group)."""
        with self._lock:
            self._bucket_callbacks[index] = self._bucket_callbacks.get(index, 0.0) + seconds
            self._hook_callbacks += seconds

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
            # Bytes and calls count as the call is made; its time as it completes, in its step:
            # a completion's callback runs after the waiters wake, and can come after log().
            with self._lock:
                for field, value in (("bytes", payload), ("calls", 1)):
                    at = (bucket, f"{key}.{field}")
                    self._stats[at] = self._stats.get(at, 0.0) + value
                self._wire += sent
                step = self._step

            def record(seconds):
                with self._lock:
                    if self._step == step:
                        at = (bucket, f"{key}.seconds")
                        self._stats[at] = self._stats.get(at, 0.0) + seconds
            if kwargs.get("async_op") and work is not None:
                work.get_future().add_done_callback(lambda _: record(time.perf_counter() - issued))
            else:
                record(time.perf_counter() - issued)
            return work
        return counted

    # -- log() --------------------------------------------------------------------------------

    def log(self, loss):
        if self.events is None:  # the trial's last step was logged: more means the script ran past it
            raise RuntimeError(f"commtune.log: the trial's {self._last_step} steps are over (the script was given "
                               f"them as its steps argument, script.steps_arg) and this is one more")
        value = float(loss.detach().float().item()) if isinstance(loss, torch.Tensor) else float(loss)
        now = time.perf_counter()
        start = self._start
        forward = self._forward if self._forward is not None else start
        backward = max(self._backward, forward) if self._backward is not None else forward
        done = max(self._backward_done, backward) if self._backward_done is not None else backward
        optimizer = max(self._optimizer, done) if self._optimizer is not None else now
        times = (forward - start, backward - forward, done - backward, optimizer - done, self._hook_inline + self._hook_callbacks,
                 now - optimizer, now - start)
        lr = self.optimizer.param_groups[0]["lr"] if self.optimizer is not None else 0.0
        with self._lock:
            self._stats[(None, "hook_inline_s")] = self._hook_inline
            stats = sorted((name, v) for (b, name), v in self._stats.items() if b is None)
            buckets = sorted((b, name, v) for (b, name), v in self._stats.items() if b is not None)
            wire = self._wire + self._builtin_bytes
            uncompressed = self._reference_bytes
            layout = [self._buckets[i] for i in sorted(self._buckets)]
        if layout:
            self.events.message("buckets", step=self._step, buckets=layout)
        self.events.step(self._step, value, lr, times, wire, uncompressed, stats, buckets)
        self._losses.append(value)
        with self._lock:  # a late completion then finds the step over
            self._step += 1
            self._reset(time.perf_counter())
        if not math.isfinite(value) and self.on_nonfinite != "warn":
            message = f"rank {self.rank}: the loss is {value} at step {self._step - 1}"
            self.events.message("error", rank=self.rank, error_kind="diverged", message=message)
            self._failed = True
            raise Diverged(message)
        if self._step == self._last_step:
            self.finish()

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

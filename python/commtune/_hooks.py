"""The trial's hook, registered with PyTorch's own implementations.

The tuner has checked the trial's configuration against commtune's schema (names, ranges,
defaults) before the script starts; what is left here is to build PyTorch's objects from it.
A setting that the named hook does not take is refused, naming the field, because a setting
silently dropped would make the trial something other than what its configuration says.
"""
import os
from collections import OrderedDict

import torch
import torch.distributed as dist


class SettingError(ValueError):
    """A trial setting this hook cannot take: the message names the field."""


POWERSGD_KEYS = ("matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate", "use_error_feedback",
                 "warm_start", "orthogonalization_epsilon", "random_seed", "compression_stats_logging_frequency",
                 "batch_tensors_with_same_shape")
POST_LOCAL_SGD_KEYS = ("start_localSGD_iter", "post_local_gradient_allreduce", "subgroup_size", "period",
                       "warmup_steps", "hierarchy")
# What commtune's exported BytePS hook takes (python/commtune/byteps_hook.py); the other byteps_*
# settings name variants that run in commtune's engine only.
BYTEPS_KEYS = ("byteps_compressor_type", "byteps_compressor_k", "byteps_compressor_onebit_scaling",
               "byteps_compressor_randomk_rescale", "byteps_ef_type", "byteps_momentum_type", "byteps_momentum_mu",
               "byteps_seed", "byteps_min_compress_bytes", "byteps_partition_bytes")
BYTEPS_ENGINE_ONLY = {"byteps_aggregation": "server", "byteps_compress_on": None, "ranks_per_node": 0,
                      "byteps_dithering_partition": None, "byteps_dithering_normalize": None}
SLOWMO_KEYS = ("slowmo_base_algorithm", "localsgd_frequency", "slowmo_frequency", "slowmo_momentum", "slowmo_lr",
               "nprocs_per_node", "slowmo_memory_efficient", "slowmo_num_shards")
TAKES = {"allreduce": (), "none": (), "noop": (), "fp16_compress": (), "bf16_compress": (),
         "powersgd": POWERSGD_KEYS, "batched_powersgd": POWERSGD_KEYS, "post_local_sgd": POST_LOCAL_SGD_KEYS,
         "slowmo": SLOWMO_KEYS, "byteps": BYTEPS_KEYS + tuple(BYTEPS_ENGINE_ONLY)}
WRAPPERS = ("none", "fp16", "bf16")


class Registered:
    """What attach registered: the model to train (the same DDP object, or SlowMo's wrapper), the
    hook's state, and what must run after every optimizer step (an averager, SlowMo's step)."""

    def __init__(self, model, state=None, after_step=None, hook=None, follow=None):
        self.model, self.state, self.after_step, self.hook = model, state, after_step, hook
        self.follow = follow  # given the optimizer, for hooks that read its learning rate


def check(hook):
    """The hook section's fields, refused in one line when the named hook does not take one."""
    if not isinstance(hook, dict):
        raise SettingError("hook: the trial's hook section is not an object")
    name = hook.get("name", "allreduce")
    if name not in TAKES:
        taken = ", ".join(sorted(TAKES))
        raise SettingError(f"hook.name: {name!r} has no PyTorch implementation a script trial can register "
                           f"(one of: {taken})")
    wrapper = hook.get("wrapper", "none")
    if wrapper not in WRAPPERS:
        raise SettingError(f"hook.wrapper: {wrapper!r} is not one of: {', '.join(WRAPPERS)}")
    if wrapper != "none" and name in ("none", "noop", "post_local_sgd", "slowmo"):
        raise SettingError(f"hook.wrapper: {name} takes no {wrapper} wrapper (PyTorch wraps a gradient hook)")
    for key in hook:
        if key not in ("name", "wrapper") and key not in TAKES[name]:
            raise SettingError(f"hook.{key}: {name} does not take this setting")
    return name, wrapper


def register(ddp_model, hook, wrap=lambda function: function):
    """Registers the configured hook on ddp_model, wrapped by `wrap` (the trial's measurement);
    returns a Registered."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    name, wrapper = check(hook)
    settings = {k: v for k, v in hook.items() if k not in ("name", "wrapper")}
    if name == "none":
        return Registered(ddp_model)
    if name == "slowmo":
        return _slowmo(ddp_model, settings)
    if name == "post_local_sgd":
        return _post_local_sgd(ddp_model, settings, wrap)
    if name == "byteps":
        return _byteps(ddp_model, settings, wrap)
    state = None
    if name == "allreduce":
        function = default_hooks.allreduce_hook
    elif name == "noop":
        from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks
        function = debugging_hooks.noop_hook
    elif name == "fp16_compress":
        function = default_hooks.fp16_compress_hook
    elif name == "bf16_compress":
        function = default_hooks.bf16_compress_hook
    else:
        try:
            state = powerSGD_hook.PowerSGDState(process_group=None, **settings)
        except ModuleNotFoundError as e:  # numpy, which PowerSGDState draws its random vectors with
            raise SettingError(f"hook.name: {name} builds PyTorch's PowerSGDState, which imports {e.name}: the "
                               f"script's Python lacks it (pip install {e.name})") from None
        function = powerSGD_hook.powerSGD_hook if name == "powersgd" else powerSGD_hook.batched_powerSGD_hook
    if wrapper == "fp16":
        function = default_hooks.fp16_compress_wrapper(function)
    elif wrapper == "bf16":
        function = default_hooks.bf16_compress_wrapper(function)
    ddp_model.register_comm_hook(state, wrap(function))
    return Registered(ddp_model, state, hook=function)


def hierarchy_levels(text):
    """"2:2,8:4" -> [(2, 2), (8, 4)]: period:group_size pairs, as the schema's hook.hierarchy."""
    levels = []
    for pair in text.split(","):
        period, _, size = pair.partition(":")
        try:
            levels.append((int(period), int(size)))
        except ValueError:
            raise SettingError(f"hook.hierarchy: {pair!r} is not period:group_size") from None
    return levels


def _post_local_sgd(ddp_model, settings, wrap):
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook
    from torch.distributed.algorithms.model_averaging import averagers, hierarchical_model_averager

    # Groups of consecutive ranks; without a size, one per machine (PyTorch's own default counts
    # GPUs, and a CPU job has none), as the exported use_post_local_sgd.py builds them.
    size = settings.get("subgroup_size", 0) or int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    subgroup, _ = dist.new_subgroups(group_size=size)
    state = post_localSGD_hook.PostLocalSGDState(
        process_group=None, subgroup=subgroup, start_localSGD_iter=settings.get("start_localSGD_iter", 10),
        post_local_gradient_allreduce=settings.get("post_local_gradient_allreduce", True))
    ddp_model.register_comm_hook(state, wrap(post_localSGD_hook.post_localSGD_hook))
    warmup = settings.get("warmup_steps", 0)
    if settings.get("hierarchy"):
        averager = hierarchical_model_averager.HierarchicalModelAverager(
            OrderedDict(hierarchy_levels(settings["hierarchy"])), warmup_steps=warmup)
    else:
        averager = averagers.PeriodicModelAverager(period=settings.get("period", 4), warmup_steps=warmup)
    return Registered(ddp_model, state, lambda optimizer: averager.average_parameters(ddp_model.parameters()),
                      hook=post_localSGD_hook.post_localSGD_hook)


def _byteps(ddp_model, settings, wrap):
    from . import byteps_hook

    for key, allowed in BYTEPS_ENGINE_ONLY.items():
        if key in settings and allowed is not None and settings[key] != allowed:
            raise SettingError(f"hook.{key}: {settings[key]!r} runs in commtune's engine only; a script trial "
                               f"runs BytePS's algorithm ({key}={allowed!r})")
    if settings.get("byteps_compressor_type") == "dithering":
        raise SettingError("hook.byteps_compressor_type: dithering's entropy coding has no Python form; "
                           "a script trial takes onebit, topk or randomk")
    missing = [k for k in BYTEPS_KEYS if k not in settings]
    if missing:  # the tuner writes every setting; a hand-written trial must too
        raise SettingError(f"hook.{missing[0]}: the trial's configuration does not give it")
    byteps_hook.OPTIONS = {k: settings[k] for k in BYTEPS_KEYS}
    state = byteps_hook.BytePSState(ddp_model)
    ddp_model.register_comm_hook(state, wrap(byteps_hook.byteps_hook))
    return Registered(ddp_model, state, hook=byteps_hook.byteps_hook, follow=state.follow)


def _slowmo(ddp_model, settings):
    if not torch.cuda.is_available():
        raise SettingError("hook.name: slowmo runs fairscale's SlowMoDistributedDataParallel, which needs CUDA GPUs; "
                           "on the CPU, hook.name=post_local_sgd runs PyTorch's local SGD")
    try:
        from fairscale.experimental.nn.data_parallel import SlowMoBaseAlgorithm, SlowMoDistributedDataParallel
    except ImportError as e:
        raise SettingError(f"hook.name: slowmo needs fairscale in the script's Python ({e})") from None
    kwargs = dict(settings)
    base = kwargs.pop("slowmo_base_algorithm", "localsgd")
    kwargs["slowmo_base_algorithm"] = SlowMoBaseAlgorithm.SGP if base == "sgp" else SlowMoBaseAlgorithm.LOCALSGD
    # SlowMo is a DDP of its own: it wraps the module DDP wrapped, and the script trains it instead.
    model = SlowMoDistributedDataParallel(ddp_model.module, **kwargs)
    return Registered(model, None, lambda optimizer: model.perform_slowmo(optimizer), hook="slowmo")

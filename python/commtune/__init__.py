"""commtune in a user's own DDP training script: two lines, and a no-op outside a commtune trial.

    model = commtune.attach(DistributedDataParallel(model), optimizer)   # the trial's hook
    commtune.log(loss)                                                    # once per step

Inside a trial (`commtune-cli run --script`, a sweep's trial), the tuner hands each rank the
trial's configuration (COMMTUNE_TRIAL_CONFIG, a JSON file) and where to write its events
(COMMTUNE_EVENT_FILE). `attach` registers the hook the configuration names with PyTorch's own
implementations and measures each step as commtune's engine does; `log` records the step.
Outside a trial both return at once, so the script runs in production unchanged.
"""
import atexit
import os
import sys

__version__ = "0.1.0"

_trial = None


def in_trial():
    """Whether this process is a rank of a commtune trial."""
    return bool(os.environ.get("COMMTUNE_TRIAL_CONFIG"))


def attach(ddp_model, optimizer=None):
    """Registers the trial's communication hook on `ddp_model` (a DistributedDataParallel) and
    returns the model to train: `ddp_model` itself, or SlowMo's wrapper of its module. Pass the
    optimizer so that its step is timed and the hooks that act after it (post-local SGD's
    averager, SlowMo) run. Outside a trial: returns `ddp_model` untouched."""
    global _trial
    if not in_trial():
        return ddp_model
    if _trial is not None:
        raise RuntimeError("commtune.attach: this process already attached a model (one per trial)")
    from . import _rank

    _die_with_torchrun()

    event_file = os.environ.get("COMMTUNE_EVENT_FILE")
    if not event_file:
        raise RuntimeError("commtune.attach: COMMTUNE_TRIAL_CONFIG is set but COMMTUNE_EVENT_FILE is not")
    config = _rank.read_config(os.environ["COMMTUNE_TRIAL_CONFIG"])
    _trial = _rank.Trial(ddp_model, optimizer, config, event_file)
    atexit.register(_finish)
    previous = sys.excepthook

    def report(kind, value, traceback):
        _finish(value)
        previous(kind, value, traceback)
    sys.excepthook = report
    return _trial.model


def log(loss):
    """Records one step: its loss (a tensor or a number), time split, bytes and the hook's
    statistics. Call it once per optimizer step, after the step. A non-finite loss ends the trial
    as diverged (raises commtune.Diverged) unless the trial says on_nonfinite=warn."""
    if _trial is not None:
        _trial.log(loss)
    elif in_trial():
        _refuse_unattached()


def _refuse_unattached():
    """A trial's step logged before attach: nothing of it could be measured, so the trial fails
    now, saying so in the rank's event file, rather than after all its steps."""
    from . import _events
    import torch.distributed as dist

    message = ("commtune.log was called before commtune.attach: attach the model first, "
               "model = commtune.attach(DistributedDataParallel(model), optimizer)")
    template = os.environ.get("COMMTUNE_EVENT_FILE")
    if template and dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
        events = _events.EventFile(_events.event_path(template, rank), rank, world)
        events.message("error", rank=rank, error_kind="config", message=message)
        events.close()
    raise RuntimeError(message)


def _die_with_torchrun():
    """A trial's rank ends when torchrun does (the tuner ending the trial kills torchrun's whole
    process group; this covers torchrun itself being killed): Linux's parent-death signal."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() == 1:  # torchrun was gone already
            os.kill(os.getpid(), signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _finish(error=None):
    if _trial is not None:
        _trial.finish(error)


def __getattr__(name):
    if name == "Diverged":
        from ._rank import Diverged
        return Diverged
    raise AttributeError(name)

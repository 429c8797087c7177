#!/usr/bin/env python3
"""A user's own script as a trial on a GPU: tests/script_trials/train_ddp.py run by `commtune-cli run
--script` (commtune.attach registering the trial's hook) against the same script registering PyTorch's
hook by hand under torchrun, on one rank over NCCL and on two ranks sharing the one GPU over Gloo (NCCL
refuses two ranks on one device). Run by scripts/gpu-check.sh; --device cpu rehearses it on the CPU.

Both sides run the same PyTorch on the same device with the same hook, so every stored loss must equal
the script's own within 1e-5 relative (as tests/gpu/compare_gpu_runs.py allows the same kernels run
twice); a difference of exactly 0 is printed as "bit-identical".
"""
import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "tests", "script_trials", "train_ddp.py")
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import commtune_testing as ct  # noqa: E402
STEPS = 12

# (name, the trial's hook settings, the script's --direct)
HOOKS = [
    ("fp16_compress", ["hook.name=fp16_compress"], "fp16_compress"),
    ("powersgd r2", ["hook.name=powersgd", "hook.matrix_approximation_rank=2", "hook.start_powerSGD_iter=2"],
     "powersgd"),
]


def trial(cli, folder, world, backend, device, hook):
    """The script as commtune's trial: each rank's stored losses, or the error."""
    db = os.path.join(folder, "runs.db")
    sets = [*hook, f"world_size={world}", f"steps={STEPS}", f"script.args.backend={backend}",
            f"script.args.device={device}"]
    proc = subprocess.run([cli, "--db", db, "run", "-q", "--summary", os.devnull, "--script", SCRIPT, "--python",
                           sys.executable, "--steps-arg", "steps", *[a for s in sets for a in ("--set", s)]],
                          capture_output=True, text=True, timeout=300)
    found = re.search(r"stored as run (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"the trial failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    with sqlite3.connect(db) as store:
        rows = store.execute("SELECT rank, loss FROM step_metrics WHERE run_id = ? ORDER BY rank, step",
                             (int(found.group(1)),)).fetchall()
    losses = {}
    for rank, loss in rows:
        losses.setdefault(rank, []).append(loss)
    return losses


def by_hand(world, backend, device, direct):
    """The same script registering PyTorch's hook itself, under torchrun."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), OMP_NUM_THREADS="1")
    env.pop("COMMTUNE_TRIAL_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                           str(world), SCRIPT, "--steps", str(STEPS), "--direct", direct, "--rank-r", "2",
                           "--start-iter", "2", "--backend", backend, "--device", device],
                          env=env, capture_output=True, text=True, timeout=300)
    losses = ct.printed_losses(proc.stdout)
    if proc.returncode != 0 and not ct.only_pytorchs_teardown_failed(proc.stdout + proc.stderr, losses, world):
        raise RuntimeError(f"the script by hand failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the build folder holding app/commtune-cli")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args()
    cli = os.path.join(args.build, "app", "commtune-cli")
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            print("no GPU this PyTorch can use")
            return 77
    layouts = [("one rank over NCCL", 1, "nccl"), ("two ranks sharing the GPU over Gloo", 2, "gloo")]
    if args.device == "cpu":
        layouts = [("one rank over Gloo", 1, "gloo"), ("two ranks over Gloo", 2, "gloo")]
    failed = 0
    for layout, world, backend in layouts:
        for name, hook, direct in HOOKS:
            label = f"{layout}, {name}"
            try:
                with tempfile.TemporaryDirectory() as folder:
                    got = trial(cli, folder, world, backend, args.device, hook)
                expected = by_hand(world, backend, args.device, direct)
                if sorted(got) != list(range(world)) or any(len(got[r]) != STEPS for r in got) or \
                        sorted(expected) != sorted(got):
                    raise RuntimeError(f"ranks and steps differ: stored {({r: len(v) for r, v in got.items()})}, "
                                       f"by hand {({r: len(v) for r, v in expected.items()})}")
                worst = max(abs(a - b) / max(abs(b), 1e-30) for r in got for a, b in zip(got[r], expected[r]))
                verdict = "bit-identical" if worst == 0 else f"within {worst:.2g} relative"
                if worst > 1e-5:
                    failed = 1
                    verdict = f"FAILED: {worst:.2g} relative, over 1e-5"
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                failed = 1
                verdict = f"FAILED: {error}"
            print(f"{label}: {verdict}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())

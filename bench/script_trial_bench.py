"""What commtune's two lines cost a user's training step: tests/script_trials/train_ddp.py (a small MLP, two
Gloo ranks under torchrun) run with them in a trial (allreduce, so the hook is the one DDP's own reduction
matches) and without them (--plain, DDP's built-in reduction; and --direct fp16_compress against the
fp16 trial), alternating, several rounds; the median of each one's seconds per step. Goal: a step with
the measurement at most 1.1x one without (the script's steps are ~1 ms, a worst case: the
measurement's cost is per step and per bucket, not per parameter).

  .venv/bin/python bench/script_trial_bench.py [--steps 400] [--rounds 5]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "tests", "script_trials", "train_ddp.py")


def seconds_per_step(folder, steps, *args, hook=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), OMP_NUM_THREADS="1")
    env.pop("COMMTUNE_TRIAL_CONFIG", None)
    if hook is not None:
        path = os.path.join(folder, "trial.json")
        with open(path, "w") as f:
            json.dump({"hook": hook}, f)
        env.update(COMMTUNE_TRIAL_CONFIG=path, COMMTUNE_EVENT_FILE=os.path.join(folder, "events-{rank}.ctev"))
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          SCRIPT, "--steps", str(steps), *args], env=env, cwd=folder, capture_output=True, text=True,
                         check=True).stdout
    loops = [float(x) for x in re.findall(r'"loop_seconds": ([0-9.e+-]+)', out)]
    return max(loops) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    pairs = (("allreduce trial / DDP's own reduction", {"name": "allreduce"}, ("--plain",)),
             ("fp16 trial / fp16_compress_hook registered by hand", {"name": "fp16_compress"},
              ("--direct", "fp16_compress")))
    with tempfile.TemporaryDirectory() as folder:
        for label, hook, reference in pairs:
            ratios, measured, plain = [], [], []
            for _ in range(args.rounds):
                a = seconds_per_step(folder, args.steps, hook=hook)
                b = seconds_per_step(folder, args.steps, *reference)
                measured.append(a), plain.append(b), ratios.append(a / b)
            print(f"{label}: {statistics.median(measured) * 1e3:.3f} ms/step against "
                  f"{statistics.median(plain) * 1e3:.3f}; ratio median {statistics.median(ratios):.2f} "
                  f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}; goal: at most 1.10)")


if __name__ == "__main__":
    main()

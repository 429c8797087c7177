"""What commtune's two lines cost a user's training step: tests/script_trials/train_ddp.py (its MLP at
--hidden units, two Gloo ranks under torchrun) run with them in a trial and against the same script
without the measurement, alternating, several rounds: the allreduce trial against DDP's built-in
reduction (--plain; this also counts a Python hook against DDP's C++ one), the fp16 trial against
fp16_compress_hook registered by hand (the measurement alone differs), and the two lines outside a
trial against --plain (they should cost nothing). Each pair's ratio of seconds per step, round by
round. Goal (at --hidden 3150, 10.04M parameters): the measurement at most 1.02x, nothing measurable
outside a trial; a ratio whose rounds straddle the goal is reported as not told from noise.

  .venv/bin/python bench/script_trial_bench.py [--hidden 3150] [--steps 60] [--rounds 5]
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
    parser.add_argument("--hidden", type=int, default=3150, help="the MLP's hidden units (3150: 10.04M parameters)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--goal", type=float, default=1.02)
    args = parser.parse_args()
    parameters = 32 * args.hidden + args.hidden + args.hidden * args.hidden + args.hidden + 4 * args.hidden + 4
    print(f"train_ddp.py --hidden {args.hidden}: {parameters / 1e6:.2f}M parameters, {args.steps} steps, "
          f"{args.rounds} rounds")
    pairs = (("allreduce trial / DDP's own reduction", {"name": "allreduce"}, ("--plain",)),
             ("fp16 trial / fp16_compress_hook registered by hand", {"name": "fp16_compress"},
              ("--direct", "fp16_compress")),
             ("the two lines outside a trial / --plain", None, ("--plain",)))
    model = ("--hidden", str(args.hidden))
    with tempfile.TemporaryDirectory() as folder:
        for label, hook, reference in pairs:
            ratios, measured, plain = [], [], []
            for _ in range(args.rounds):
                a = seconds_per_step(folder, args.steps, *model, hook=hook)
                b = seconds_per_step(folder, args.steps, *model, *reference)
                measured.append(a), plain.append(b), ratios.append(a / b)
            low, high = min(ratios), max(ratios)
            verdict = (f"within {args.goal:.2f}" if high <= args.goal else f"over {args.goal:.2f}" if low > args.goal
                       else f"not told from noise against {args.goal:.2f}")
            print(f"{label}: {statistics.median(measured) * 1e3:.3f} ms/step against "
                  f"{statistics.median(plain) * 1e3:.3f}; ratio median {statistics.median(ratios):.3f} "
                  f"(rounds {', '.join(f'{r:.3f}' for r in ratios)}): {verdict}")


if __name__ == "__main__":
    main()

"""What it costs to start a trial: a sweep of short trials whose ranks are
forked from the launcher's zygote (core/tuner/launch/worker_zygote.h) against the
same sweep with every rank exec'd (COMMTUNE_WORKER_ZYGOTE=0), interleaved
in one run. Prints wall and CPU seconds per trial (the sweep and all its
processes), the ratio zygote / exec, and each round's ratio (its spread).

    .venv/bin/python bench/trial_start_bench.py [--trials 8] [--rounds 3] [--world 2]
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build")), "app", "commtune-cli")


def sweep(trials, world, zygote):
    """Wall and CPU seconds (this sweep and every process under it) of one sweep."""
    lrs = ",".join(f"{0.01 * (i + 1):g}" for i in range(trials))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, COMMTUNE_DB=os.path.join(d, "runs.db"), COMMTUNE_WORKER_ZYGOTE=zygote)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([CLI, "sweep", "--no-baseline", "--set", f"world_size={world}", "--set", "steps=2",
                        "--set", "model.hidden=64", "--set", "data.features=32", "--axis", f"optimizer.lr={lrs}"],
                       env=env, check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--world", type=int, default=2, help="ranks per trial")
    args = parser.parse_args()
    results = {"1": [], "0": []}
    for _ in range(args.rounds):
        for zygote in results:
            results[zygote].append(sweep(args.trials, args.world, zygote))
    per_trial = {z: (statistics.median(w for w, _ in r) / args.trials, statistics.median(c for _, c in r) / args.trials)
                 for z, r in results.items()}
    print(f"{args.trials} trials of {args.world} ranks x 2 steps, median of {args.rounds} rounds, per trial:")
    for zygote, name in (("1", "forked from the zygote"), ("0", "exec'd")):
        wall, cpu = per_trial[zygote]
        print(f"  {name:24s} {wall:.3f} s wall  {cpu:.3f} s CPU")
    print(f"  ratio zygote / exec:     {per_trial['1'][0] / per_trial['0'][0]:.2f} wall  "
          f"{per_trial['1'][1] / per_trial['0'][1]:.2f} CPU")
    # Each round ran both sweeps back to back: the spread of their ratios says what a rerun may read.
    for what, k in (("wall", 0), ("CPU", 1)):
        ratios = sorted(z[k] / e[k] for z, e in zip(results["1"], results["0"]))
        print(f"  rounds' {what} ratios:{'':8s}{' '.join(f'{r:.2f}' for r in ratios)} (min .. max)")


if __name__ == "__main__":
    main()

"""TPE against random search on real sweeps: PowerSGD rank x start iteration x
learning rate, 2 ranks on this machine, each strategy run with the same
seeds. Reports, per strategy, the best tail loss after k trials (median over
seeds), and how many trials each needs to reach the loss random search
reaches with the whole budget (the reference, measured in the same run).

  .venv/bin/python bench/tpe_sweep_bench.py [--seeds 10] [--trials 40] [--steps 30]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build")), "app", "commtune-cli")

AXES = {
    "hook.matrix_approximation_rank": [1, 2, 4, 8],
    "hook.start_powerSGD_iter": [2, 10, 20],
    "optimizer.lr": {"min": 0.001, "max": 0.5, "log": True},
}


def sweep(strategy, seed, trials, steps, workdir):
    """Tail losses of the trials, in the order they ran."""
    spec = {"base": {"steps": steps, "world_size": 2, "model": {"hidden": 128}, "data": {"features": 64},
                     "hook": {"name": "powersgd"}},
            "axes": AXES, "strategy": strategy, "trials": trials, "seed": seed, "baseline": False}
    spec_path = os.path.join(workdir, f"{strategy}-{seed}.json")
    db = os.path.join(workdir, f"{strategy}-{seed}.db")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    subprocess.run([CLI, "--db", db, "sweep", "--spec", spec_path], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    compared = json.loads(subprocess.run([CLI, "--db", db, "compare", "--sweep", "1", "--json"], check=True,
                                         capture_output=True, text=True).stdout)
    runs = sorted(compared["runs"], key=lambda r: r["trial"])
    return [r["digest"].get("tail_loss", float("inf")) for r in runs]


def trials_to(losses, target):
    for k, loss in enumerate(losses):
        if loss <= target:
            return k + 1
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for strategy in ("random", "tpe"):
            results[strategy] = [sweep(strategy, s, args.trials, args.steps, workdir) for s in range(args.seeds)]
    print(f"PowerSGD rank {AXES['hook.matrix_approximation_rank']} x start {AXES['hook.start_powerSGD_iter']} x "
          f"lr log-uniform [0.001, 0.5]; {args.steps} steps, 2 ranks; {args.seeds} seeds x {args.trials} trials "
          "each (TPE: Optuna's defaults, 10 startup trials)")
    checkpoints = [k for k in (5, 10, 15, 20, 30, 40, 60) if k <= args.trials]
    print("best tail loss after k trials, median over seeds:")
    print(f"{'strategy':10}" + "".join(f"  k={k:<6}" for k in checkpoints))
    for strategy, runs in results.items():
        print(f"{strategy:10}" + "".join(f"  {statistics.median(min(l[:k]) for l in runs):8.5f}" for k in checkpoints))
    # The quality random search reaches with the whole budget (median over seeds): how many trials each needs.
    level = statistics.median(min(l) for l in results["random"])
    needed = {}
    for strategy, runs in results.items():
        reached = [trials_to(l, level) for l in runs]
        needed[strategy] = statistics.median(r if r is not None else args.trials + 1 for r in reached)
        shown = " ".join(str(r) if r is not None else f">{args.trials}" for r in reached)
        print(f"{strategy:10} trials to reach {level:.5f} (random's median best after {args.trials}): {shown}; "
              f"median {needed[strategy]}")
    print(f"ratio tpe/random (median trials to that level): {needed['tpe'] / needed['random']:.2f}; "
          f"TPE saves {needed['random'] - needed['tpe']:g} of {needed['random']:g} trials (a miss counts as "
          f"{args.trials + 1})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PowerSGD hook time per step: commtune's C++ hook vs PyTorch's Python
powerSGD_hook, on the same model, weights, data and world size, measured in
one run. Goal: a ratio of at most 0.7.

Hook time is the CPU time spent in the hook and its callbacks in a step
(thread CPU clocks on both sides, so time blocked on the P and Q allreduces
counts on neither). Only steps where PowerSGD compresses count. One bucket:
PyTorch's hook aborts with several on Gloo (2.11 as 1.13). The rounds alternate the
engines; the ratio is the median over rounds.

    .venv/bin/python bench/powersgd_hook_bench.py [--ranks 1 2 4] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import commtune_testing as ct  # noqa: E402

REFERENCE = os.path.join(REPO, "tests", "oracle", "commtune_reference.py")


def one_round(args, rank, workdir):
    init = os.path.join(workdir, "init.pt")
    start = 5
    run = ct.run_commtune(workdir, {
        "world_size": args.world, "steps": args.steps, "threads": args.threads, "hook.name": "powersgd",
        "hook.matrix_approximation_rank": rank, "hook.start_powerSGD_iter": start, "model.hidden": args.hidden,
        "data.features": args.features, "ddp.first_bucket_cap_mb": 1000, "ddp.bucket_cap_mb": 1000,
        "weights.save_initial": init})
    rows = [json.loads(line) for line in open(run.metrics_path)]
    skip = start + 10
    mine = statistics.mean(r["time_hook_s"] for r in rows if r["step"] >= skip)
    out = os.path.join(workdir, "reference.json")
    subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(workdir, "summary.json"), "--init", init,
                    "--out", out, "--time-hook"], check=True, capture_output=True, timeout=args.round_timeout)
    theirs = statistics.mean(s for r in json.load(open(out))["ranks"] for s in r["hook_seconds"][skip:])
    return mine, theirs, run.summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--round-timeout", type=float, default=300)
    args = parser.parse_args()
    print(f"MLP {args.features}-{args.hidden}-{args.hidden}-10, {args.world} ranks, Gloo, one bucket, "
          f"{args.threads} thread(s) per rank; hook CPU ms per step (mean over compressed steps)")
    print(f"{'rank':>4} {'commtune':>10} {'PyTorch':>10} {'ratio':>7} {'compression':>12}")
    for rank in args.ranks:
        rows = []
        with tempfile.TemporaryDirectory() as d:
            for _ in range(args.rounds):
                mine, theirs, summary = one_round(args, rank, d)
                rows.append((mine, theirs))
        ratio = statistics.median(m / t for m, t in rows)
        mine = statistics.median(m for m, _ in rows)
        theirs = statistics.median(t for _, t in rows)
        rate = summary["hook_stats"]["compression_rate"]
        print(f"{rank:>4} {1e3 * mine:>10.3f} {1e3 * theirs:>10.3f} {ratio:>7.3f} {rate:>11.1f}x", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Step time of commtune vs PyTorch's Python DDP, measured in one run.

Both train the same model from the same initial weights on the same data
with the same hook, world size, backend (Gloo), thread count and BLAS
(OpenBLAS limited to the same threads). A step is everything from fetching
the batch to the optimizer update and reading the loss. The rounds alternate
the two engines, so machine noise hits both; the reported ratio is the
median over rounds of commtune's median step time over PyTorch's.

The byteps hook has no PyTorch implementation; its reference is the same
algorithm as a PyTorch DDP hook, the use_byteps.py that `export production`
writes for the run (bit for bit the same gradients). --set passes hook
settings on (e.g. --set hook.byteps_compressor_type=onebit).

--affinity says where ranks run: "none" leaves placement to the OS for both
engines (their defaults); "cores" binds every rank of both engines to its own
equal share of the cores (commtune's cpu_affinity=cores).

    /usr/bin/python3 bench/ddp_step_bench.py [--hook allreduce] [--set KEY=VALUE ...] [--world 2] [--rounds 5]
                                             [--affinity none]

Stop other jobs first: two stray processes on this 2-core machine once
doubled every time measured here.
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


def steady(values):
    """Drops the warm-up steps the same way commtune's summary does."""
    skip = min(len(values) // 10 + (len(values) > 1), 20)
    return values[skip:]


def one_round(args, workdir):
    init = os.path.join(workdir, "init.pt")
    overrides = {"world_size": args.world, "steps": args.steps, "threads": args.threads, "hook.name": args.hook,
                 "hook.wrapper": args.wrapper, "model.hidden": args.hidden, "model.layers": args.layers,
                 "data.features": args.features, "data.batch_size": args.batch, "weights.save_initial": init,
                 "cpu_affinity": args.affinity}
    overrides.update(kv.split("=", 1) for kv in args.set)
    run = ct.run_commtune(workdir, overrides, timeout=args.round_timeout)
    mine = run.summary["step_time_ms"]["median"]
    out = os.path.join(workdir, "reference.json")
    env = dict(os.environ, COMMTUNE_REFERENCE_PIN="1" if args.affinity == "cores" else "0")
    exported = []
    if args.hook == "byteps":  # its PyTorch form: the exported hook
        subprocess.run([ct.CLI, "export", "production", "--from", os.path.join(workdir, "summary.json"), "--out",
                        os.path.join(workdir, "export")], check=True, capture_output=True)
        exported = ["--exported", os.path.join(workdir, "export", "use_byteps.py")]
    subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(workdir, "summary.json"), "--init", init,
                    "--out", out, *exported], check=True, capture_output=True, env=env, timeout=args.round_timeout)
    seconds = json.load(open(out))["seconds"]
    theirs = 1e3 * statistics.median([s for rank in seconds for s in steady(rank)])
    return mine, theirs, run.summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hook", default="allreduce")
    parser.add_argument("--wrapper", default="none")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="another run setting")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--affinity", choices=["none", "cores"], default="none")
    parser.add_argument("--round-timeout", type=float, default=120, help="seconds one engine's run may take")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.rounds):
            try:
                mine, theirs, summary = one_round(args, d)
            except subprocess.TimeoutExpired as e:
                print(f"round {r + 1}: stalled ({os.path.basename(str(e.cmd[0]))} killed after {e.timeout:.0f} s); "
                      f"not counted", flush=True)
                continue
            rows.append((mine, theirs))
            print(f"round {r + 1}: commtune {mine:7.3f} ms/step   PyTorch DDP {theirs:7.3f} ms/step   "
                  f"ratio {mine / theirs:.3f}", flush=True)
    ratio = statistics.median(m / t for m, t in rows)
    params = summary["parameter_count"]
    breakdown = summary["step_time_ms"]
    print(f"\nMLP {args.features}-{'-'.join([str(args.hidden)] * args.layers)}-10 ({params / 1e6:.2f}M parameters), "
          f"{args.world} ranks, Gloo, hook {args.hook}{'' if args.wrapper == 'none' else ' wrapped ' + args.wrapper}, "
          f"batch {args.batch}, {args.threads} thread(s) per rank, affinity {args.affinity}")
    print(f"commtune step split (last round, ms): forward {breakdown['forward']:.2f}, backward {breakdown['backward']:.2f}, "
          f"comm wait {breakdown['comm_wait']:.2f}, optimizer {breakdown['optimizer']:.2f}; hook compute "
          f"{breakdown['hook']:.2f}")
    print(f"ratio commtune / PyTorch DDP (median of {args.rounds} rounds): {ratio:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rounds": rows, "ratio": ratio}, f, indent=1)


if __name__ == "__main__":
    main()

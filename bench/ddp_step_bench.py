#!/usr/bin/env python3
"""Step time of commtune vs PyTorch's Python DDP, measured in one run.

Both train the same model from the same initial weights on the same data
with the same hook, world size, backend (Gloo), thread count and BLAS
(PyTorch 2.11's wheel: MKL, sized by torch.set_num_threads on both sides). A step is everything from fetching
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

    .venv/bin/python bench/ddp_step_bench.py [--hook allreduce] [--set KEY=VALUE ...] [--world 2] [--rounds 5]
                                             [--affinity none]
    .venv/bin/python bench/ddp_step_bench.py --matrix [--rounds 5]
    python3 bench/ddp_step_bench.py --gpu [--rounds 3]        (on a GPU machine: scripts/gpu-check.sh)

--matrix runs the engine's speed goals in one interleaved run: MLPs of 1M
(512-768-768-10, 400 steps a run) and 10.5M parameters (1024, ten layers of
1024, 100 steps), batch 64,
with one bucket and with DDP's default buckets (25 MB, the first 1 MB),
hooks allreduce, none (DDP's built-in reduction), PowerSGD rank 1 and 4
(one bucket only: PyTorch's hook aborts with several on Gloo, 2.11 as 1.13).

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


def one_round(args, workdir, case):
    """One run of each engine on `case` (settings over the command line's); returns their median step
    times (ms) and commtune's summary."""
    init = os.path.join(workdir, "init.pt")
    overrides = {"world_size": args.world, "steps": args.steps, "threads": args.threads, "hook.name": args.hook,
                 "hook.wrapper": args.wrapper, "model.hidden": args.hidden, "model.layers": args.layers,
                 "data.features": args.features, "data.batch_size": args.batch, "weights.save_initial": init,
                 "cpu_affinity": args.affinity}
    overrides.update(kv.split("=", 1) for kv in args.set)
    overrides.update(case)
    run = ct.run_commtune(workdir, overrides, check=False, timeout=args.round_timeout, extra_args=["--no-store"])
    if run.returncode != 0:
        raise RuntimeError(run.stderr)
    mine = run.summary["step_time_ms"]["median"]
    out = os.path.join(workdir, "reference.json")
    env = dict(os.environ, COMMTUNE_REFERENCE_PIN="1" if args.affinity == "cores" else "0")
    exported = []
    if overrides["hook.name"] == "byteps":  # its PyTorch form: the exported hook
        subprocess.run([ct.CLI, "export", "production", "--from", os.path.join(workdir, "summary.json"), "--out",
                        os.path.join(workdir, "export")], check=True, capture_output=True)
        exported = ["--exported", os.path.join(workdir, "export", "use_byteps.py")]
    subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(workdir, "summary.json"), "--init", init,
                    "--out", out, *exported], check=True, capture_output=True, env=env, timeout=args.round_timeout)
    seconds = json.load(open(out))["seconds"]
    theirs = 1e3 * statistics.median([s for rank in seconds for s in steady(rank)])
    return mine, theirs, run.summary


# --matrix: the sizes, bucket layouts and hooks of the engine's speed goals
# (at most 0.8 of PyTorch for allreduce and DDP's built-in reduction, 0.7 for
# PowerSGD), batch 64.
# Steps per run: the 1M model's 9 ms steps need more of them for a median that noise does not move.
MATRIX_SIZES = {"1M": {"data.features": 512, "model.hidden": 768, "model.layers": 2, "steps": 400},
                "10M": {"data.features": 1024, "model.hidden": 1024, "model.layers": 10, "steps": 100}}
MATRIX_BUCKETS = {"one bucket": {"ddp.bucket_cap_mb": 1000, "ddp.first_bucket_cap_mb": 1000},
                  "25 MB buckets": {"ddp.bucket_cap_mb": 25, "ddp.first_bucket_cap_mb": 1}}
MATRIX_HOOKS = {"allreduce": {"hook.name": "allreduce"}, "none (built-in)": {"hook.name": "none"},
                "powersgd r1": {"hook.name": "powersgd", "hook.matrix_approximation_rank": 1,
                                "hook.start_powerSGD_iter": 2},
                "powersgd r4": {"hook.name": "powersgd", "hook.matrix_approximation_rank": 4,
                                "hook.start_powerSGD_iter": 2}}
MATRIX_GOALS = {"allreduce": 0.8, "none (built-in)": 0.8, "powersgd r1": 0.7, "powersgd r4": 0.7}


# --gpu: the GPU speed check (scripts/gpu-check.sh): one rank on the GPU (NCCL), MLPs of 10.5M and
# 101M parameters (4096, six layers of 4096), DDP's default buckets, hooks allreduce, fp16 and PowerSGD rank 4;
# no goal yet, the ratio is the finding.
GPU_SIZES = {"10M": MATRIX_SIZES["10M"] | {"steps": 200},
             "100M": {"data.features": 4096, "model.hidden": 4096, "model.layers": 6, "steps": 100}}
GPU_HOOKS = {"allreduce": MATRIX_HOOKS["allreduce"], "fp16": {"hook.name": "fp16_compress"},
             "powersgd r4": MATRIX_HOOKS["powersgd r4"]}


def matrix_cases(gpu):
    sizes, layouts, hooks = (GPU_SIZES, {"25 MB buckets": MATRIX_BUCKETS["25 MB buckets"]}, GPU_HOOKS) if gpu else \
        (MATRIX_SIZES, MATRIX_BUCKETS, MATRIX_HOOKS)
    for size, shape in sizes.items():
        for layout, buckets in layouts.items():
            for hook, settings in hooks.items():
                # PyTorch's PowerSGD hook aborts with several buckets on Gloo (2.11 as 1.13).
                if hook.startswith("powersgd") and layout != "one bucket" and not gpu:
                    continue
                place = {"device": "cuda", "world_size": 1} if gpu else {}
                yield (size, layout, hook), dict(shape, **buckets, **settings, **place, **{"data.batch_size": 64})


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
    parser.add_argument("--matrix", action="store_true",
                        help="every size, bucket layout and hook of the speed goals, interleaved in each round")
    parser.add_argument("--gpu", action="store_true",
                        help="the GPU matrix: 10M and 100M parameters, allreduce, fp16 and PowerSGD rank 4, one rank "
                             "on the GPU (NCCL) for both engines")
    args = parser.parse_args()
    args.matrix = args.matrix or args.gpu

    cases = list(matrix_cases(args.gpu)) if args.matrix else [(("", "", args.hook), {})]
    rows = {key: [] for key, _ in cases}
    summaries = {}
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.rounds):
            for key, case in cases:
                try:
                    mine, theirs, summaries[key] = one_round(args, d, case)
                except subprocess.TimeoutExpired as e:
                    failures += 1
                    print(f"round {r + 1} {' '.join(key)}: stalled ({os.path.basename(str(e.cmd[0]))} killed after "
                          f"{e.timeout:.0f} s); not counted", flush=True)
                    continue
                except (subprocess.CalledProcessError, RuntimeError) as e:  # the others still run
                    failures += 1
                    text = getattr(e, "stderr", None) or str(e)
                    text = (text.decode(errors="replace") if isinstance(text, bytes) else text).strip().splitlines()
                    print(f"round {r + 1} {' '.join(key)}: FAILED ({text[-1] if text else type(e).__name__}); "
                          f"not counted", flush=True)
                    continue
                rows[key].append((mine, theirs))
                print(f"round {r + 1}{' ' + ', '.join(key) if args.matrix else ''}: commtune {mine:7.3f} ms/step   "
                      f"PyTorch DDP {theirs:7.3f} ms/step   ratio {mine / theirs:.3f}", flush=True)
    results = []
    for key, _ in cases:
        if not rows[key]:
            continue
        ratio = statistics.median(m / t for m, t in rows[key])
        results.append({"size": key[0], "buckets": key[1], "hook": key[2], "ratio": ratio,
                        "parameters": summaries[key]["parameter_count"],
                        "commtune_ms": statistics.median(m for m, _ in rows[key]),
                        "pytorch_ms": statistics.median(t for _, t in rows[key])})
    if args.matrix:
        where = "one rank on the GPU, NCCL" if args.gpu else f"{args.world} ranks x {args.threads} thread(s), Gloo"
        print(f"\n{where}, batch 64; median of {args.rounds} rounds")
        print(f"{'model':6s} {'buckets':14s} {'hook':16s} {'commtune ms':>12s} {'PyTorch ms':>11s} {'ratio':>6s}  goal")
        for row in results:
            goal = None if args.gpu else MATRIX_GOALS[row["hook"]]
            verdict = "none set" if goal is None else f"<= {goal} {'met' if row['ratio'] <= goal else 'NOT met'}"
            print(f"{row['size']:6s} {row['buckets']:14s} {row['hook']:16s} {row['commtune_ms']:12.2f} "
                  f"{row['pytorch_ms']:11.2f} {row['ratio']:6.3f}  {verdict}")
    elif results:
        summary = summaries[cases[0][0]]
        params = summary["parameter_count"]
        breakdown = summary["step_time_ms"]
        print(f"\nMLP {args.features}-{'-'.join([str(args.hidden)] * args.layers)}-10 ({params / 1e6:.2f}M parameters), "
              f"{args.world} ranks, Gloo, hook {args.hook}{'' if args.wrapper == 'none' else ' wrapped ' + args.wrapper}, "
              f"batch {args.batch}, {args.threads} thread(s) per rank, affinity {args.affinity}")
        print(f"commtune step split (last round, ms): forward {breakdown['forward']:.2f}, backward "
              f"{breakdown['backward']:.2f}, comm wait {breakdown['comm_wait']:.2f}, optimizer "
              f"{breakdown['optimizer']:.2f}; hook compute {breakdown['hook']:.2f}")
        print(f"ratio commtune / PyTorch DDP (median of {args.rounds} rounds): {results[0]['ratio']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    if failures:
        print(f"{failures} run(s) failed or stalled: not counted above")
    return 1 if failures or not results else 0


if __name__ == "__main__":
    sys.exit(main())

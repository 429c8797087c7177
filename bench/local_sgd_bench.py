"""Local SGD and SlowMo against allreduce: bytes on the wire and mean step
time per step, as ratios to allreduce measured in the same run (default MLP,
2 ranks on this machine, loopback). Mean, not median: averaging happens every
few steps, and its cost belongs to the steps between.

  .venv/bin/python bench/local_sgd_bench.py [--steps 300] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build")), "app", "commtune-cli")

CONFIGS = [
    ("allreduce", {"hook.name": "allreduce"}),
    ("post_local_sgd period 4", {"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 10,
                                 "hook.post_local_gradient_allreduce": "false", "hook.period": 4}),
    ("slowmo lsgd 3 / slow 48", {"hook.name": "slowmo", "hook.localsgd_frequency": 3, "hook.slowmo_frequency": 48}),
    ("slowmo lsgd 12 / slow 48", {"hook.name": "slowmo", "hook.localsgd_frequency": 12, "hook.slowmo_frequency": 48}),
]


def run(overrides, steps, workdir):
    summary = os.path.join(workdir, "summary.json")
    args = [CLI, "run", "-q", "--no-store", "--summary", summary, "--set", f"steps={steps}"]
    for k, v in overrides.items():
        args += ["--set", f"{k}={v}"]
    subprocess.run(args, check=True, capture_output=True)
    s = json.load(open(summary))
    return s["step_time_ms"]["mean"], s["traffic"]["wire_bytes_per_step"], s["loss"]["final"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {name: [] for name, _ in CONFIGS}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.rounds):  # alternate, so drift hits every configuration alike
            for name, overrides in CONFIGS:
                results[name].append(run(overrides, args.steps, d))
    base_ms = statistics.median(r[0] for r in results["allreduce"])
    base_bytes = results["allreduce"][0][1]
    print(f"{'configuration':26s} {'ms/step':>8s} {'ratio':>6s} {'MB/step':>8s} {'ratio':>6s} {'final loss':>10s}")
    for name, _ in CONFIGS:
        ms = statistics.median(r[0] for r in results[name])
        wire = results[name][0][1]
        print(f"{name:26s} {ms:8.2f} {ms / base_ms:6.2f} {wire / 1e6:8.3f} {wire / base_bytes:6.3f} "
              f"{results[name][0][2]:10.4f}")


if __name__ == "__main__":
    main()

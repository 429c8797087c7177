"""The what-if model against real bandwidth-limited links.

Linux's token bucket filter (tc tbf) shapes the loopback device inside a
network namespace of its own (root only), so two ranks on this machine talk
over a link of a known rate. For each hook the same run goes:

  - unshaped (the namespace's loopback as it is: what `predict` starts from),
  - shaped at each rate (what the prediction is checked against),
  - unshaped with `network.emulate` at the same link (the emulator checked
    against the same shaped runs).

tbf on lo shapes every packet once, whichever rank sends it, so two ranks
sending at once share the rate: the equivalent full-duplex link between two
nodes carries R/2 per direction, and that is the link the prediction and the
emulation are given. lo's 64 KiB MTU with a small burst would drop every full
frame: the namespace's lo gets MTU 9000 and a 20 kB burst.

  sudo .venv/bin/python bench/shaped_links.py [--rates 20,100,1000] [--hooks allreduce,fp16,...]
                                              [--hidden 1024 --layers 3 --features 512] [--steps 16] [--json FILE]

Prints predicted / measured and emulated / measured per hook and rate;
tests/integration/test_shaped_links.py runs it at a smaller size.
"""
import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build")), "app", "commtune-cli")

HOOKS = {
    "allreduce": ["hook.name=allreduce"],
    "fp16": ["hook.name=fp16_compress"],
    "powersgd_r1": ["hook.name=powersgd", "hook.matrix_approximation_rank=1", "hook.start_powerSGD_iter=2"],
    "powersgd_r4": ["hook.name=powersgd", "hook.matrix_approximation_rank=4", "hook.start_powerSGD_iter=2"],
    # The compressors in their allgather form: what they send here is what the model prices. The server form
    # (the byteps default) is priced as BytePS's push and pull to servers on links of their own, a deployment
    # two ranks on one shaped loopback do not have (docs/network-model.md).
    "onebit": ["hook.name=byteps", "hook.byteps_compressor_type=onebit", "hook.byteps_aggregation=allgather"],
    "topk": ["hook.name=byteps", "hook.byteps_compressor_type=topk", "hook.byteps_compressor_k=0.01",
             "hook.byteps_aggregation=allgather"],
}
# What a message hop costs on the namespace's loopback through TCP and tbf,
# besides the rate: given to the prediction and the emulation alike.
LINK_LATENCY_US = 50


def unavailable():
    """Why links cannot be shaped here, or None when they can."""
    if os.geteuid() != 0:
        return "shaping a link needs root (ip netns add, tc qdisc)"
    for tool in ("ip", "tc"):
        if not shutil.which(tool):
            return f"'{tool}' is not installed (Debian package iproute2)"
    probe = f"ctprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return "cannot create a network namespace: " + made.stderr.strip()
    try:
        up = subprocess.run(["ip", "-n", probe, "link", "set", "lo", "mtu", "9000", "up"], capture_output=True,
                            text=True)
        tbf = subprocess.run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "20mbit",
                              "burst", "20kb", "latency", "400ms"], capture_output=True, text=True)
        if up.returncode or tbf.returncode:
            return "cannot shape loopback in a namespace: " + (up.stderr + tbf.stderr).strip()
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@contextlib.contextmanager
def namespace(rate_mbit=None):
    """A network namespace whose loopback carries `rate_mbit` (None: unshaped); yields its name."""
    name = f"ctshape{os.getpid()}x{rate_mbit or 0}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "mtu", "9000", "up"], check=True)
        if rate_mbit:
            subprocess.run(["tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", f"{rate_mbit}mbit",
                            "burst", "20kb", "latency", "400ms"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def cli(*args, netns=None, timeout=3600):
    cmd = [CLI, *map(str, args)]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def run(netns, sets, workdir):
    args = ["run", "--quiet", "--summary", os.path.join(workdir, "summary.json")]
    for s in sets:
        args += ["--set", s]
    proc = cli(*args, netns=netns)
    return int(proc.stderr.rsplit("stored as run ", 1)[1].split()[0])


def step_ms(run_id):
    return json.loads(cli("show", run_id, "--json").stdout)["digest"]["step_ms"]


def link_args(rate_mbit):
    """The equivalent full-duplex link of a shaped lo carrying rate_mbit in all."""
    return ["--bandwidth-gbit", f"{rate_mbit / 2 / 1000:g}", "--latency-us", str(LINK_LATENCY_US)]


def emulate_sets(rate_mbit):
    return ["network.emulate=custom", f"network.bandwidth_gbit_s={rate_mbit / 2 / 1000:g}",
            f"network.latency_us={LINK_LATENCY_US}"]


def predicted_ms(run_ids, rate_mbit):
    """Each unshaped run's predicted step on the shaped link, as `predict` gives it for them together
    (one compute profile pooled over the runs of the model): run id -> ms."""
    out = json.loads(cli("predict", *run_ids, *link_args(rate_mbit), "--nodes", 2, "--json").stdout)
    return {r["run_id"]: 1e3 * r["predictions"][0]["step_s"] for r in out["runs"]}


def steps_at(rate_mbit, steps):
    """Steps for a run at this rate: the slow links set the pace exactly, the fast ones need more steps
    for a median that the machine's noise does not move."""
    if not rate_mbit:
        return 4 * steps
    return steps if rate_mbit < 50 else 2 * steps if rate_mbit < 500 else 4 * steps


def measure(rates, hooks, model, steps, emulate=True, log=sys.stderr, keep=None):
    """Every hook unshaped, shaped at every rate and (optionally) emulated; returns rows of figures.
    With `keep`, the runs stay in that folder's store for a closer look."""
    rows = []
    with (contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory()) as scratch:
        os.environ["COMMTUNE_DB"] = os.path.join(scratch, "runs.db")
        base = ["world_size=2"] + model
        with namespace() as plain:
            unshaped = {h: run(plain, base + [f"steps={steps_at(0, steps)}"] + HOOKS[h], scratch) for h in hooks}
            emulated = {}
            if emulate:
                for h in hooks:
                    for r in rates:
                        emulated[(h, r)] = run(plain, base + [f"steps={steps_at(r, steps)}"] + HOOKS[h] +
                                               emulate_sets(r), scratch)
        for r in rates:
            predicted = predicted_ms([unshaped[h] for h in hooks], r)
            with namespace(r) as shaped_ns:
                for h in hooks:
                    shaped = run(shaped_ns, base + [f"steps={steps_at(r, steps)}"] + HOOKS[h], scratch)
                    row = {"hook": h, "rate_mbit": r, "unshaped_run": unshaped[h], "shaped_run": shaped,
                           "unshaped_ms": step_ms(unshaped[h]), "measured_ms": step_ms(shaped),
                           "predicted_ms": predicted[unshaped[h]]}
                    row["predicted_ratio"] = row["predicted_ms"] / row["measured_ms"]
                    if emulate:
                        row["emulated_run"] = emulated[(h, r)]
                        row["emulated_ms"] = step_ms(emulated[(h, r)])
                        row["emulated_ratio"] = row["emulated_ms"] / row["measured_ms"]
                    rows.append(row)
                    print(f"{h:12s} {r:5g} Mbit/s  measured {row['measured_ms']:9.1f} ms  predicted "
                          f"{row['predicted_ms']:9.1f} ({row['predicted_ratio']:.2f})" +
                          (f"  emulated {row['emulated_ms']:9.1f} ({row['emulated_ratio']:.2f})" if emulate else ""),
                          file=log, flush=True)
    return rows


def remeasure(row, model, steps):
    """Runs a row's shaped configuration (and its emulated one) once more and keeps the faster step medians:
    load on the machine only adds time to a run and does not repeat, where an error of the model does."""
    sets = ["world_size=2"] + model + [f"steps={steps_at(row['rate_mbit'], steps)}"] + HOOKS[row["hook"]]
    scratch = os.path.dirname(os.environ["COMMTUNE_DB"])
    with namespace(row["rate_mbit"]) as shaped_ns:
        again = run(shaped_ns, sets, scratch)
    row.setdefault("measured_attempts_ms", [row["measured_ms"]]).append(step_ms(again))
    row["measured_ms"] = min(row["measured_attempts_ms"])
    row["predicted_ratio"] = row["predicted_ms"] / row["measured_ms"]
    if "emulated_ms" in row:
        with namespace() as plain:
            again = run(plain, sets + emulate_sets(row["rate_mbit"]), scratch)
        row.setdefault("emulated_attempts_ms", [row["emulated_ms"]]).append(step_ms(again))
        row["emulated_ms"] = min(row["emulated_attempts_ms"])
        row["emulated_ratio"] = row["emulated_ms"] / row["measured_ms"]
    return row


def summary(rows):
    out = {}
    for key in ("predicted_ratio", "emulated_ratio"):
        values = [r[key] for r in rows if key in r]
        if values:
            out[key] = {"median_abs_error": statistics.median(abs(v - 1) for v in values),
                        "min": min(values), "max": max(values)}
    # Does the model pick the hook the link really favours? Per rate, the
    # fastest by prediction and the fastest measured.
    out["fastest"] = {}
    for rate in sorted({r["rate_mbit"] for r in rows}):
        at = [r for r in rows if r["rate_mbit"] == rate]
        out["fastest"][f"{rate:g}"] = {"predicted": min(at, key=lambda r: r["predicted_ms"])["hook"],
                                       "measured": min(at, key=lambda r: r["measured_ms"])["hook"]}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="20,100,1000", help="Mbit/s, comma-separated")
    parser.add_argument("--hooks", default=",".join(HOOKS))
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--steps", type=int, default=16,
                        help="steps of a run at the slowest rates (2x from 50 Mbit/s, 4x from 500 and unshaped)")
    parser.add_argument("--no-emulate", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--keep", help="keep the runs in a store in this folder")
    args = parser.parse_args()
    why = unavailable()
    if why:
        sys.exit(f"shaped_links: {why}")
    model = [f"data.features={args.features}", f"model.hidden={args.hidden}", f"model.layers={args.layers}"]
    rates = [float(r) for r in args.rates.split(",")]
    rows = measure(rates, args.hooks.split(","), model, args.steps, emulate=not args.no_emulate, keep=args.keep)
    result = {"rows": rows, "summary": summary(rows)}
    print(json.dumps(result["summary"], indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

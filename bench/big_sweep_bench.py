"""Big sweeps: planning memory, and the commands that read a
stored sweep of 10^5 trials, each beside a reference measured in the same run.

- Planning: `sweep --plan` of a grid, its peak resident memory less that of
  `commtune-cli --version` (the process before it plans). Goal: 10^6 trials
  under 200 MB.
- A stored sweep: a real 4-trial sweep (an allreduce baseline and PowerSGD
  ranks 1, 2, 4; 2 ranks, 8 steps) copied into N trials, each copy at its own
  learning rate (its baseline with it), rows and all, and stamped as its
  sweep would have stamped it (db/config_check.h). `list`, `compare`,
  and `recommend` are timed against a bare SQLite read of the same rows
  (runs, step metrics, step statistics of the sweep); the Analysis page's
  figures (build/bench/analysis_bench) against reading the sweep's runs.
  Goal: each under 5 s at 10^5 trials.

  .venv/bin/python bench/big_sweep_bench.py [--trials 100000] [--plan-trials 1000000]
"""
import argparse
import json
import os
import resource
import sqlite3
import subprocess
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build")), "app", "commtune-cli")


def peak_rss_mb(args):
    """Peak resident memory of one commtune-cli run, MB (wait4's rusage of that child alone)."""
    proc = subprocess.Popen([CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"commtune-cli {' '.join(args)} failed: {proc.stderr.read().decode()}")
    return usage.ru_maxrss / 1024


def plan_memory(trials):
    points = round(trials ** (1 / 3))
    axes = ["--axis", f"optimizer.lr=0.01..1:{points}", "--axis", f"optimizer.momentum=0..0.9:{points}",
            "--axis", f"seed=0..{points - 1}:{points}"]
    # A build's first command asks the worker for its components (and counts the worker's memory as a
    # child's): ask once, so the plan measures what every later command holds.
    peak_rss_mb(["params", "--json"])
    start = time.perf_counter()
    planned = peak_rss_mb(["sweep", "--plan", "--max-trials", "1000000", *axes])
    wall = time.perf_counter() - start
    idle = peak_rss_mb(["--version"])
    print(f"plan of {points ** 3} trials: {wall:.1f} s, peak {planned:.0f} MB, {planned - idle:.0f} MB over "
          f"`--version`'s {idle:.0f} MB (goal: under 200 MB at 10^6)")


def copy_sweep(db, copies):
    """The 4 runs of sweep 1 copied `copies` times, copy k at learning rate 0.05 + k * 1e-7."""
    con = sqlite3.connect(db)
    con.execute("CREATE TEMP TABLE copies (k INTEGER PRIMARY KEY)")
    con.execute("INSERT INTO copies WITH RECURSIVE c(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM c WHERE k < ?) "
                "SELECT k FROM c", (copies - 1,))
    width = con.execute("SELECT count(*) FROM runs").fetchone()[0]

    def columns(table, skip=()):
        return [r[1] for r in con.execute(f"PRAGMA table_info({table})") if r[1] not in skip]

    lr = "(0.05 + c.k * 1e-7)"
    run_cols = columns("runs", ("id", "trial", "name", "config", "config_stamp"))
    con.execute(f"INSERT INTO runs (id, trial, name, config, {', '.join(run_cols)}) "
                f"SELECT r.id + c.k * {width}, r.trial + c.k * {width}, r.name || ' lr=' || {lr}, "
                f"json_set(r.config, '$.optimizer.lr', {lr}), {', '.join('r.' + x for x in run_cols)} "
                f"FROM runs r, copies c ORDER BY c.k, r.id")
    for table in ("step_metrics", "step_stats", "artifacts", "run_events"):
        cols = columns(table, ("run_id", "id"))
        con.execute(f"INSERT INTO {table} (run_id, {', '.join(cols)}) SELECT t.run_id + c.k * {width}, "
                    f"{', '.join('t.' + x for x in cols)} FROM {table} t, copies c WHERE t.run_id <= {width}")
    con.execute(f"INSERT INTO run_params (run_id, name, value) SELECT p.run_id + c.k * {width}, p.name, "
                f"CASE WHEN p.name = 'optimizer.lr' THEN {lr} ELSE p.value END FROM run_params p, copies c "
                f"WHERE p.run_id <= {width}")
    restamp_copies(con, width)
    con.commit()
    con.close()


def siphash24(texts, key):
    """SipHash-2-4 of each text under a 16-byte key (db::siphash24), over all texts at once a block at a time."""
    data = [t.encode() for t in texts]
    lengths = np.array([len(d) for d in data], dtype=np.uint64)
    blocks = int(lengths.max()) // 8 + 1
    buffer = np.zeros((len(data), 8 * blocks), dtype=np.uint8)
    for i, d in enumerate(data):
        buffer[i, :len(d)] = np.frombuffer(d, dtype=np.uint8)
    words = buffer.view("<u8")
    full = lengths // np.uint64(8)
    k0, k1 = (np.uint64(int.from_bytes(key[i:i + 8], "little")) for i in (0, 8))
    v = [np.full(len(data), k0 ^ np.uint64(0x736f6d6570736575)), np.full(len(data), k1 ^ np.uint64(0x646f72616e646f6d)),
         np.full(len(data), k0 ^ np.uint64(0x6c7967656e657261)), np.full(len(data), k1 ^ np.uint64(0x7465646279746573))]

    def rotl(x, b):
        return (x << np.uint64(b)) | (x >> np.uint64(64 - b))

    def rounds(rows, n):
        v0, v1, v2, v3 = (x[rows] for x in v)
        for _ in range(n):
            v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32)
            v2 += v3; v3 = rotl(v3, 16); v3 ^= v2
            v0 += v3; v3 = rotl(v3, 21); v3 ^= v0
            v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32)
        for x, y in zip(v, (v0, v1, v2, v3)):
            x[rows] = y

    def absorb(rows, m):
        v[3][rows] ^= m
        rounds(rows, 2)
        v[0][rows] ^= m

    for j in range(blocks - 1):
        rows = np.nonzero(full > np.uint64(j))[0]
        absorb(rows, words[rows, j])
    everyone = np.arange(len(data))
    absorb(everyone, words[everyone, full.astype(np.int64)] | (lengths << np.uint64(56)))
    v[2] ^= np.uint64(0xff)
    rounds(everyone, 4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def stamp_key():
    """This user's stamp key (db/config_check.h): the 32 hex digits of stamp.key in the user's data folder."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    with open(os.path.join(base, "commtune", "stamp.key"), "rb") as f:
        return bytes.fromhex(f.read(32).decode())


def restamp_copies(con, width, chunk=10000):
    """Each copy gets the stamp its sweep would have written (db/config_check.h): the identity of the check that
    passed the original and the hash of the copy's own text. json_set leaves every other token of the text as it
    was, and the check returns a learning rate in its range unchanged, so the copy is a text the check passes
    unchanged, as its stamp says. The originals' stamps, computed here the same way, must match the stored ones."""
    originals = con.execute("SELECT id, config, config_stamp FROM runs WHERE id <= ?", (width,)).fetchall()
    if any(stamp is None for _, _, stamp in originals):
        print("the sweep stored no stamps (no stamp key of this user's): every copy is checked as it is read")
        return
    key = stamp_key()
    checks = {}
    for (i, config, stamp), h in zip(originals, siphash24([c for _, c, _ in originals], key)):
        identity, _, stored = (stamp or "").rpartition(":")
        if stored != f"{int(h):016x}":
            raise SystemExit(f"run {i}'s stamp {stamp!r} is not the one computed here: the copies would be checked")
        checks[i] = identity
    last = con.execute("SELECT max(id) FROM runs").fetchone()[0]
    for first in range(width + 1, last + 1, chunk):
        rows = con.execute("SELECT id, config FROM runs WHERE id >= ? AND id < ?", (first, first + chunk)).fetchall()
        hashes = siphash24([config for _, config in rows], key)
        con.executemany("UPDATE runs SET config_stamp = ? WHERE id = ?",
                        [(f"{checks[(i - 1) % width + 1]}:{int(h):016x}", i) for (i, _), h in zip(rows, hashes)])


def bare_read(db):
    """The reference: every row of the sweep's runs, step metrics and step statistics, read with SQLite alone."""
    con = sqlite3.connect(db)
    start = time.perf_counter()
    rows = 0
    for sql in ("SELECT * FROM runs WHERE sweep_id = 1",
                "SELECT m.* FROM step_metrics m JOIN runs r ON r.id = m.run_id WHERE r.sweep_id = 1",
                "SELECT s.* FROM step_stats s JOIN runs r ON r.id = s.run_id WHERE r.sweep_id = 1"):
        for _ in con.execute(sql):
            rows += 1
    con.close()
    return time.perf_counter() - start, rows


def timed(db, *args):
    """One command's wall time, its answer written to a file as `> answer.json` would (captured into this
    process, 10^5 rows of JSON cost a second of decoding here, counted against the command)."""
    with tempfile.TemporaryFile() as answer:
        start = time.perf_counter()
        proc = subprocess.run([CLI, "--db", db, *args], stdout=answer, stderr=subprocess.PIPE, text=True,
                              timeout=3600)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        return wall, f"failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1] if proc.stderr else ''}"
    return wall, ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100000, help="trials of the stored sweep")
    parser.add_argument("--plan-trials", type=int, default=1000000, help="trials of the planned grid (0: skip)")
    args = parser.parse_args()
    if args.plan_trials:
        plan_memory(args.plan_trials)
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "runs.db")
        spec = os.path.join(d, "sweep.json")
        with open(spec, "w") as f:
            json.dump({"base": {"world_size": 2, "steps": 8, "model": {"hidden": 32}, "data": {"features": 16},
                                "hook": {"name": "powersgd", "start_powerSGD_iter": 2}},
                       "axes": {"hook.matrix_approximation_rank": [1, 2, 4]}}, f)
        proc = subprocess.run([CLI, "--db", db, "sweep", "--spec", spec], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"the sweep to copy failed ({proc.returncode}):\n{proc.stderr}")
        copy_sweep(db, max(1, args.trials // 4))
        size = os.path.getsize(db) / 1e6
        reference, rows = bare_read(db)
        print(f"stored sweep: {args.trials // 4 * 4} trials, {size:.0f} MB; bare SQLite read of its {rows} rows: "
              f"{reference:.2f} s")
        for name, command in (("list", ["list", "--sweep", "1", "--json"]),
                              ("compare", ["compare", "--sweep", "1", "--json"]),
                              ("recommend", ["recommend", "--sweep", "1", "--network", "1gbit", "--json"])):
            # The median of three: one run on a shared 2-core machine can be a second off either way.
            walls, problems = zip(*(timed(db, *command) for _ in range(3)))
            wall, problem = sorted(walls)[1], next((p for p in problems if p), "")
            print(f"{name:10s} {wall:8.2f} s  {wall / reference:7.2f}x the bare read  (goal: under 5 s; "
                  f"three runs: {', '.join(f'{w:.2f}' for w in walls)} s) {problem}")
        # The Analysis page's figures, computed as the page computes them (bench/analysis_bench.cpp).
        analysis = os.path.join(os.path.dirname(os.path.dirname(CLI)), "bench", "analysis_bench")
        # It describes the engine's components as the app does: ask the worker built beside the CLI.
        env = dict(os.environ, COMMTUNE_WORKER=os.path.join(os.path.dirname(CLI), "commtune-worker"))
        proc = subprocess.run([analysis, db, "1"], capture_output=True, text=True, timeout=3600, env=env)
        print(f"analysis   {proc.stdout.strip() or proc.stderr.strip()}  (goal: under 5 s)")


if __name__ == "__main__":
    main()

"""The tuner's start-up: what `commtune-cli --version`, `list` and `show` cost, and the desktop
app's first window, now that neither loads libtorch (docs/architecture.md). Each is timed
beside a reference in the same run:

- `list` and `show` against a bare `sqlite3` query of the same rows (the runs; one run and its
  step metrics), the cost of reading them at all;
- `--version`, `list` and the app's first window against `commtune-worker --version`, the
  same start with libtorch loaded (what every tuner process paid when it linked the engine).

Wall time is the median of --repeats starts; memory the peak resident set of one start
(wait4's rusage of that child alone). Goals: `list`, `show` and `--version` well under 0.1 s on
an idle machine, the first window under 1 s.

  .venv/bin/python bench/tuner_start_bench.py [--repeats 20]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "app", "commtune-cli")
WORKER = os.path.join(BUILD, "app", "commtune-worker")
GUI = os.path.join(BUILD, "app", "commtune")


def start(argv, env):
    """Wall seconds and peak resident MB of one run of argv, which must succeed."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024


def measure(argv, env, repeats):
    runs = [start(argv, env) for _ in range(repeats)]
    return statistics.median(w for w, _ in runs), max(m for _, m in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOME=tmp, XDG_CACHE_HOME=os.path.join(tmp, "cache"),
                   XDG_DATA_HOME=os.path.join(tmp, "data"), QT_QPA_PLATFORM="offscreen")
        db = os.path.join(tmp, "runs.db")
        subprocess.run([CLI, "--db", db, "run", "--set", "steps=4"], env=env, check=True, capture_output=True)
        cases = [
            ("commtune-worker --version (libtorch loaded)", [WORKER, "--version"]),
            ("commtune-cli --version", [CLI, "--version"]),
            ("sqlite3: the runs", ["sqlite3", db, "SELECT * FROM runs"]),
            ("commtune-cli list", [CLI, "--db", db, "list"]),
            ("sqlite3: run 1 and its steps", ["sqlite3", db, "SELECT * FROM runs WHERE id = 1; "
                                              "SELECT * FROM step_metrics WHERE run_id = 1"]),
            ("commtune-cli show 1", [CLI, "--db", db, "show", "1"]),
        ]
        if os.path.exists(GUI):
            cases.append(("commtune: first window (offscreen)", [GUI, "--db", db, "--quit-when-shown"]))
        results = {name: measure(argv, env, args.repeats) for name, argv in cases}
    torch_wall, torch_rss = results[cases[0][0]]
    print(f"{'':44} {'median s':>9} {'peak MB':>8}  ratio")
    for name, (wall, rss) in results.items():
        reference = {"commtune-cli list": "sqlite3: the runs", "commtune-cli show 1": "sqlite3: run 1 and its steps"}.get(name)
        ratio = ""
        if reference:
            ratio = f"{wall / results[reference][0]:.1f}x {reference}; "
        if name != cases[0][0] and not name.startswith("sqlite3"):
            ratio += f"{wall / torch_wall:.2f}x the time, {rss / torch_rss:.2f}x the memory of a start with libtorch"
        print(f"{name:44} {wall:9.4f} {rss:8.1f}  {ratio}")


if __name__ == "__main__":
    main()

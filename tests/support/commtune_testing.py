"""Helpers shared by the Python tests: locate the build, run commtune, read
its summaries and metrics, query its run store, and inspect processes
through /proc."""
import atexit
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "app", "commtune-cli")
WORKER = os.path.join(BUILD, "app", "commtune-worker")
# The reference PyTorch: the interpreter ctest runs these tests with (the
# build's COMMTUNE_ORACLE_PYTHON: the project's .venv with PyTorch 2.11, or
# Debian's python3 with 1.13 for the Debian build).
ORACLE_PYTHON = os.environ.get("COMMTUNE_ORACLE_PYTHON", sys.executable)

sys.path.insert(0, os.path.join(REPO, "tests", "oracle"))

def reference_torch_version():
    """The reference PyTorch's version without its local part ("2.11.0"): the libtorch the build links."""
    out = subprocess.run([ORACLE_PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                         text=True, check=True).stdout
    return out.strip().split("+")[0].split("a0")[0]


_STORE_DIR = tempfile.mkdtemp(prefix="commtune-test-store-")
atexit.register(shutil.rmtree, _STORE_DIR, ignore_errors=True)


def fresh_store():
    """Points commtune (through $COMMTUNE_DB) at a new, empty run store; returns its path.
    Tests never touch the user's store."""
    path = tempfile.mkdtemp(dir=_STORE_DIR)
    os.environ["COMMTUNE_DB"] = os.path.join(path, "runs.db")
    return os.environ["COMMTUNE_DB"]


def store():
    return os.environ["COMMTUNE_DB"]


fresh_store()


def cli(*args, check=True, timeout=600):
    """Runs commtune-cli with these arguments; returns the CompletedProcess."""
    proc = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"commtune-cli {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def cli_json(*args):
    """Runs a commtune-cli command with --json and parses what it prints."""
    return json.loads(cli(*args, "--json").stdout)


def query(sql, params=(), path=None):
    """Rows of a read-only query on the run store, as another reader would make it."""
    connection = sqlite3.connect(f"file:{path or store()}?mode=ro", uri=True, timeout=10)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def stored_losses(run_id):
    """A run's stored losses, rank by rank, step by step."""
    return [loss for (loss,) in query("SELECT loss FROM step_metrics WHERE run_id = ? ORDER BY rank, step", (run_id,))]


class Run:
    """A finished run: its exit status, stderr, summary and metrics rows, read
    when it ended (the next run in the same folder writes the same files)."""
    def __init__(self, returncode, stderr, summary, metrics_path):
        self.returncode = returncode
        self.stderr = stderr
        self.summary = summary
        self.metrics = []
        if os.path.exists(metrics_path):
            with open(metrics_path) as f:
                self.metrics = [json.loads(line) for line in f]

    def losses(self):
        """Per rank, the loss of every step."""
        world = 1 + max(r["rank"] for r in self.metrics)
        out = [[] for _ in range(world)]
        for r in sorted(self.metrics, key=lambda r: (r["rank"], r["step"])):
            out[r["rank"]].append(r["loss"])
        return out


def overrides_to_args(overrides):
    args = []
    for key, value in overrides.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        args += ["--set", f"{key}={value}"]
    return args


def run_commtune(workdir, overrides, check=True, timeout=600, extra_args=()):
    """Runs `commtune-cli run` with `--set` overrides; returns a Run."""
    summary_path = os.path.join(workdir, "summary.json")
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    for stale in (summary_path, metrics_path):  # an earlier run's in this folder
        if os.path.exists(stale):
            os.remove(stale)
    args = [CLI, "run", "--quiet", "--summary", summary_path, "--metrics", metrics_path]
    args += overrides_to_args(overrides) + list(extra_args)
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else None
    if check and proc.returncode != 0:
        raise AssertionError(f"commtune failed ({proc.returncode}):\n{proc.stderr}\n{json.dumps(summary, indent=1)}")
    return Run(proc.returncode, proc.stderr, summary, metrics_path)


def process_state(pid):
    """The state letter of a process (R, S, Z, ...), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def is_running(pid):
    """True while the process exists and is not a zombie (a dead process its parent has not reaped)."""
    return process_state(pid) not in (None, "Z", "X")


def children_of(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            kids.append(int(entry))
    return kids


def wait_for(predicate, timeout, interval=0.05):
    """Polls until predicate() is true; returns the seconds it took, or None on timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    return None


def start_commtune(workdir, overrides):
    """Starts `commtune-cli run` in the background; returns (Popen, metrics path, summary path)."""
    summary_path = os.path.join(workdir, "summary.json")
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    args = [CLI, "run", "--quiet", "--summary", summary_path, "--metrics", metrics_path] + overrides_to_args(overrides)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    atexit.register(proc.kill)  # a test that fails midway leaves no training job behind (its ranks follow)
    return proc, metrics_path, summary_path


def wait_until_training(proc, metrics_path, world_size, timeout=60):
    """Waits until every rank has reported a few steps; returns the worker pids by rank."""
    def training():
        if not os.path.exists(metrics_path):
            return False
        ranks = {json.loads(line)["rank"] for line in open(metrics_path) if line.endswith("\n")}
        return len(ranks) == world_size
    if wait_for(training, timeout) is None:
        raise AssertionError("the run did not start training in time")
    ranks = {}
    for pid in children_of(proc.pid):
        rank = worker_rank(pid)
        if rank is not None:
            ranks[rank] = pid
    return [ranks[r] for r in sorted(ranks)]


def worker_rank(pid):
    """A worker's RANK; None for the launcher's other child, the zygote its ranks are forked from."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    return int(env[b"RANK"]) if b"RANK" in env else None


def torchscript_model(folder, forward, features=32, classes=5):
    """A TorchScript file of one Linear(features, classes) layer whose forward
    returns `forward` (a Python expression of `self` and `x`); returns its path."""
    path = os.path.join(folder, "model.pt")
    script = os.path.join(folder, "make_model.py")
    with open(script, "w") as f:  # torch.jit.script reads the source
        f.write("import torch\n"
                "class Net(torch.nn.Module):\n"
                "    def __init__(self):\n"
                "        super().__init__()\n"
                f"        self.fc = torch.nn.Linear({features}, {classes})\n"
                "    def forward(self, x):\n"
                f"        return {forward}\n"
                f"torch.jit.script(Net()).save({path!r})\n")
    subprocess.run([ORACLE_PYTHON, script], check=True)
    return path


def load_gradient_dumps(dump_dir, world, steps):
    """commtune's (or the reference's) gradient dumps: [step][rank] -> {key: tensor}."""
    import torch
    return [[torch.load(os.path.join(dump_dir, f"grads-rank{r}-step{s}.pt")) for r in range(world)]
            for s in range(steps)]


def relative_error(a, b):
    """max |a - b| / max |b| (0 when both are zero)."""
    scale = b.abs().max().item()
    err = (a.double() - b.double()).abs().max().item()
    return err / scale if scale > 0 else err


def frobenius_error(a, b):
    """||a - b|| / ||b|| over all elements (the absolute difference when b is zero)."""
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    norm = b.norm().item()
    diff = (a - b).norm().item()
    return diff / norm if norm > 0 else diff


def check_resume_repeats(test, settings, steps, resume_at, resume_settings=None):
    """Runs `settings` for `steps` steps with a checkpoint at `resume_at`, then again resumed from it (with
    `resume_settings` over `settings`); asserts the resumed run repeats the uninterrupted one loss for loss and
    ends with the same parameters."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        folder = os.path.join(a, "checkpoints")
        full = run_commtune(a, dict(settings, **{"steps": steps, "checkpoint.dir": folder,
                                                 "checkpoint.every": resume_at}), extra_args=["--no-store"])
        resumed = run_commtune(b, dict(settings, **(resume_settings or {}),
                                       **{"steps": steps,
                                          "checkpoint.resume": os.path.join(folder, f"step-{resume_at:06d}")}),
                               extra_args=["--no-store"])
        for rank, losses in enumerate(resumed.losses()):
            test.assertEqual(losses, full.losses()[rank][resume_at:], f"rank {rank}")
        test.assertEqual(resumed.summary["param_digest"], full.summary["param_digest"])


def documented_env(cwd, env=None):
    """The environment the docs' commands run in, in `cwd`: the reference PyTorch's
    environment active (its bin folder first on PATH, as `source .venv/bin/activate` puts
    it: `python3` is its Python), and commtune's binaries and `build/` where the docs say
    they are (on PATH, and `build` in `cwd` when it has none)."""
    if not os.path.lexists(os.path.join(cwd, "build")):
        os.symlink(BUILD, os.path.join(cwd, "build"))
    env = dict(os.environ if env is None else env)
    env["PATH"] = os.pathsep.join([os.path.dirname(ORACLE_PYTHON), os.path.join(BUILD, "app"), env.get("PATH", "")])
    if sys.prefix != sys.base_prefix:  # the project's scripts set up this environment, not one in `cwd`
        env["COMMTUNE_VENV"] = sys.prefix
    return env


def shell_as_documented(command, cwd, env=None, timeout=600):
    """Runs a command as the docs show it, in a shell in `cwd`, in documented_env."""
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=documented_env(cwd, env), capture_output=True,
                          text=True, timeout=timeout)


def mlp_parameter_sizes(config):
    """The built-in MLP's parameters and their element counts, from a run's config."""
    model, data = config["model"], config["data"]
    widths = [data["features"]] + [model["hidden"]] * model["layers"]
    sizes = {}
    for i in range(model["layers"]):
        sizes[f"hidden.{i}.weight"], sizes[f"hidden.{i}.bias"] = widths[i] * widths[i + 1], widths[i + 1]
    sizes["output.weight"], sizes["output.bias"] = widths[-1] * data["classes"], data["classes"]
    return sizes


def byteps_payload_bytes(kind, k, n):
    """A compressed payload of n float32 elements (docs/compressors.md), k as BytePS resolves it."""
    if kind == "onebit":
        return 4 + 4 * ((n + 31) // 32)
    if k >= 1:
        kept = int(k)
    else:
        import numpy as np
        size = 4 * n
        kept = max(1, int(np.float32(k) * np.float32(size + (128 - size % 128) % 128) / np.float32(4)))
    return 8 * min(kept, n)


def byteps_pushed_bytes(payload, n, min_compress_bytes=65536, partition_bytes=4096000):
    """A parameter of n float32 elements in a byteps push: whole under min_compress_bytes, else
    each partition (partition_bytes; BytePS's defaults) as a payload of payload(elements) bytes."""
    if 4 * n < min_compress_bytes:
        return 4 * n
    part = partition_bytes // 4
    return sum(payload(min(part, n - first)) for first in range(0, n, part))


def documented_check_command(path):
    """The command an exported file's docstring gives to check it here."""
    with open(path) as f:
        doc = f.read().split('"""')[1]
    lines = [line.strip() for line in doc.splitlines() if "-m torch.distributed.run" in line]
    if len(lines) != 1:
        raise AssertionError(f"{path} documents {len(lines)} check commands:\n{doc}")
    return lines[0]


class LocalSlurm:
    """scripts/slurm-local.sh's SLURM for one test, in its own state folder, with `nodes` node
    daemons on this machine; the test is skipped, saying why, where it cannot start (not root,
    no slurm-wlm)."""

    def __init__(self, test, nodes=1):
        self.test = test
        self.nodes = nodes

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="commtune-slurm-")
        self.env = dict(os.environ, SLURM_LOCAL_DIR=self.dir, SLURM_LOCAL_NODES=str(self.nodes))
        proc = subprocess.run([os.path.join(REPO, "scripts", "slurm-local.sh"), "start"], env=self.env,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            shutil.rmtree(self.dir, ignore_errors=True)
        if proc.returncode == 77:
            self.test.skipTest(proc.stderr.strip())
        self.test.assertEqual(proc.returncode, 0, proc.stderr)
        self.env["SLURM_CONF"] = proc.stdout.strip().split("=", 1)[1]
        return self

    def __exit__(self, *exc):
        subprocess.run([os.path.join(REPO, "scripts", "slurm-local.sh"), "stop"], env=self.env, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)

    def wait(self, job_id, timeout):
        """The job's (JobState, ExitCode) once it has left the queue."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = subprocess.run(["scontrol", "show", "job", job_id], env=self.env, capture_output=True,
                                   text=True).stdout
            fields = dict(item.split("=", 1) for item in shown.split() if "=" in item)
            if fields.get("JobState") not in (None, "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return fields["JobState"], fields["ExitCode"]
            time.sleep(0.5)
        subprocess.run(["scancel", job_id], env=self.env)
        self.test.fail(f"SLURM job {job_id} did not end in {timeout} s")

    def step_daemons(self, job_id):
        """The pids of this SLURM's step daemons for the job (titled "slurmstepd: [JOB.STEP]", each
        holding its node's log in the state folder open): another test's SLURM numbers its jobs
        from 1 too."""
        title = f"slurmstepd: [{job_id}.".encode()
        pids = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if not f.read().startswith(title):
                        continue
                fds = os.listdir(f"/proc/{pid}/fd")
                if any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith(self.dir + "/") for fd in fds):
                    pids.append(int(pid))
            except OSError:  # gone meanwhile
                pass
        return pids

    @staticmethod
    def output(folder, job_id):
        path = os.path.join(folder, f"slurm-{job_id}.out")
        return open(path).read()[-3000:] if os.path.exists(path) else "(no slurm output)"


TEARDOWN_ABORT = "terminate called without an active exception"


def printed_losses(stdout):
    """Each rank's losses as the example script prints them at its end: {rank: [loss, ...]}."""
    losses = {}
    for line in re.findall(r'\{"rank": \d+, "losses": \[[^\]]*\]\}', stdout):
        row = json.loads(line)
        losses[row["rank"]] = row["losses"]
    return losses


def only_pytorchs_teardown_failed(output, losses, world):
    """Whether a torchrun of the example script failed only in PyTorch's own teardown: every rank printed its
    losses (its loop and last collective done), then a rank aborted with the line Gloo's process group can
    leave after Python comm hooks (core/tuner/launch/script_job.cpp, teardown_abort, accepts the same)."""
    return sorted(losses) == list(range(world)) and TEARDOWN_ABORT in output and "exitcode  : -6" in output

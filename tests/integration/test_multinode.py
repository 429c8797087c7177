"""Runs launched elsewhere, first-class in the store: the launch scripts that
`export launch` writes start a job as two "nodes" on this machine (two
torchrun invocations, --nnodes 2, rendezvous on loopback; and the sbatch file
submitted to a real SLURM on this machine, scripts/slurm-local.sh), and `import --follow`
streams its event files into the run store while it runs, so the store (and
every view reading it) has its steps before the job ends; compare and
recommend then use it like a local run. A node that dies is given up within
the quiet limit, naming its rank."""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

SMALL = ["--set", "model.hidden=128", "--set", "data.features=64"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_env(job):
    """A node's environment as a user's would be: no PYTHON, no TORCHRUN_ARGS, and a python3
    first on PATH that cannot import torch (as with pyenv), the reference PyTorch's environment
    next: the script finds its `python`."""
    bin_dir = os.path.join(job, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    without_torch = os.path.join(bin_dir, "python3")
    if not os.path.exists(without_torch):
        with open(without_torch, "w") as f:
            f.write(f"#!/bin/sh\nexec {ct.ORACLE_PYTHON} -S \"$@\"\n")  # -S: no site-packages, no torch
        os.chmod(without_torch, 0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "TORCHRUN_ARGS")}
    env.update(COMMTUNE_WORKER=ct.WORKER, EVENT_DIR=os.path.join(job, "events"),
               PATH=os.pathsep.join([bin_dir, os.path.dirname(ct.ORACLE_PYTHON), os.environ["PATH"]]))
    return env


def start_nodes(job, count=2):
    """`count` torchrun invocations of the exported script, each in its own process group."""
    return [subprocess.Popen(["sh", os.path.join(job, "launch_torchrun.sh")], env=node_env(job),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
            for _ in range(count)]


def ranks_of(job):
    """The pids of the ranks that write into `job`'s event folder, wherever they are in the process tree."""
    marker = ("COMMTUNE_EVENT_FILE=" + os.path.join(job, "events")).encode()
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if any(item.startswith(marker) for item in f.read().split(b"\0")):
                    pids.append(int(pid))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return pids


def stop(procs, job):
    """SIGKILLs each node (torchrun and its shell); the ranks, which torchrun 2.x starts in sessions of
    their own, must follow their agent within seconds: none is left training."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    gone = ct.wait_for(lambda: not ranks_of(job), 30)
    for pid in ranks_of(job):  # leave nothing behind for the next test, then fail
        os.kill(pid, signal.SIGKILL)
    if gone is None:
        raise AssertionError(f"ranks of {job} outlived their torchrun agents")


def export_job(job, steps, local_steps=None):
    """Runs the configuration here for `local_steps` (default: `steps`) and exports it for a job of `steps`;
    returns the local run's id."""
    base = ct.cli("run", "--quiet", "--summary", os.path.join(job, "base.json"), *SMALL, "--set", "world_size=2",
                  "--set", f"steps={local_steps or steps}")
    run_id = int(base.stderr.rsplit("stored as run ", 1)[1].split()[0])
    ct.cli("export", "launch", "--run", run_id, "--set", f"steps={steps}", "--nodes", 2, "--ranks-per-node", 1,
           "--rendezvous", f"127.0.0.1:{free_port()}", "--out", job)
    return run_id


class MultiNode(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def test_two_torchrun_nodes_stream_into_the_store_while_they_run(self):
        with tempfile.TemporaryDirectory() as job:
            baseline = export_job(job, 150)
            with open(os.path.join(job, "run.json")) as f:
                self.assertEqual(json.load(f)["world_size"], 2)
            nodes = start_nodes(job)
            try:
                importer = subprocess.Popen([ct.CLI, "import", "--follow", os.path.join(job, "events"), "--quiet",
                                             "--name", "two nodes", "--quiet-after", "60"],
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                seen = []
                while importer.poll() is None:
                    try:
                        rows = ct.query("SELECT count(*) FROM step_metrics m JOIN runs r ON r.id = m.run_id "
                                        "WHERE r.name = 'two nodes' AND r.status = 'running'")[0][0]
                    except Exception:  # the run is not created yet
                        rows = 0
                    seen.append(rows)
                    time.sleep(0.05)
                out, err = importer.communicate()
                for node in nodes:
                    self.assertEqual(node.wait(timeout=120), 0, node.stderr.read()[-2000:])
            finally:
                stop(nodes, job)
            self.assertEqual(importer.returncode, 0, err)
            # Live: the store had some of its steps, not all, while the job ran.
            self.assertTrue(any(0 < n < 2 * 150 for n in seen), seen[-20:])
            run = next(r for r in ct.cli_json("list") if r["name"] == "two nodes")
            self.assertEqual((run["status"], run["world_size"], run["steps_completed"]), ("succeeded", 2, 150))
            self.assertEqual(ct.query("SELECT count(DISTINCT rank), count(*) FROM step_metrics WHERE run_id = ?",
                                      (run["id"],)), [(2, 300)])
            # Wall times come from the ranks' step times, so they grow with the steps even when read at once.
            walls = [w for (w,) in ct.query("SELECT wall_s FROM step_metrics WHERE run_id = ? AND rank = 0 "
                                            "ORDER BY step", (run["id"],))]
            self.assertEqual(walls, sorted(walls))
            self.assertGreater(walls[-1], 0)
            # compare and recommend take it as a run of the same model and data as the local one.
            compared = {r["id"]: r for r in ct.cli_json("compare", baseline, run["id"])["runs"]}
            self.assertEqual(compared[run["id"]]["digest"]["steps"], 150)
            self.assertEqual(compared[run["id"]]["fingerprint"], compared[baseline]["fingerprint"])
            advice = ct.cli_json("recommend", baseline, run["id"], "--network", "10gbit", "--baseline", baseline)
            # Same configuration, same seed: one configuration of two runs, the local one its baseline.
            imported = next(c for c in advice["candidates"] if run["id"] in c["runs"])
            self.assertEqual(sorted(imported["runs"]), sorted([baseline, run["id"]]))
            self.assertTrue(imported["baseline"])
            self.assertGreater(imported["prediction"]["step_s"], 0)

    def test_the_sbatch_script_runs_under_a_real_slurm(self):
        """launch.sbatch submitted as its header says, to the SLURM that scripts/slurm-local.sh
        starts on this machine (slurmctld, slurmd, munge on 127.0.0.1): one node, two tasks."""
        with tempfile.TemporaryDirectory() as job, ct.LocalSlurm(self) as slurm:
            base = ct.cli("run", "--quiet", *SMALL, "--set", "world_size=2", "--set", "steps=2")
            run_id = int(base.stderr.rsplit("stored as run ", 1)[1].split()[0])
            ct.cli("export", "launch", "--run", run_id, "--set", "steps=20", "--nodes", 1, "--ranks-per-node", 2,
                   "--out", job)
            env = dict(slurm.env, COMMTUNE_WORKER=ct.WORKER, MASTER_PORT=str(free_port()))
            submitted = subprocess.run(["sbatch", "--parsable", "launch.sbatch"], cwd=job, env=env,
                                       capture_output=True, text=True, timeout=60)
            self.assertEqual(submitted.returncode, 0, submitted.stderr)
            job_id = submitted.stdout.strip().split(";")[0]
            state = slurm.wait(job_id, timeout=300)
            self.assertEqual(state, ("COMPLETED", "0:0"), slurm.output(job, job_id))
            ct.cli("import", os.path.join(job, "events"), "--name", "slurm")
            run = next(r for r in ct.cli_json("list") if r["name"] == "slurm")
            self.assertEqual((run["status"], run["world_size"], run["steps_completed"]), ("succeeded", 2, 20))

    def test_the_local_slurm_starts_again_after_a_stop_that_cut_a_job_short(self):
        """A stop while a job runs, then a start: the controller kept the job as running on its node,
        which never reported idle again, and the start gave up after 20 s (a second run of the docs'
        cluster command failed so)."""
        script = os.path.join(ct.REPO, "scripts", "slurm-local.sh")
        with tempfile.TemporaryDirectory() as job, ct.LocalSlurm(self) as slurm:
            submitted = subprocess.run(["sbatch", "--parsable", "--wrap", "sleep 600"], cwd=job, env=slurm.env,
                                       capture_output=True, text=True, timeout=60)
            self.assertEqual(submitted.returncode, 0, submitted.stderr)

            def running():
                return subprocess.run(["squeue", "-h", "-o", "%T"], env=slurm.env, capture_output=True,
                                      text=True).stdout.split() == ["RUNNING"]

            self.assertIsNotNone(ct.wait_for(running, 60))
            subprocess.run([script, "stop"], env=slurm.env, timeout=60, check=True)
            again = subprocess.run([script, "start"], env=slurm.env, capture_output=True, text=True, timeout=120)
            self.assertEqual(again.returncode, 0, again.stderr)
            queue = subprocess.run(["squeue", "-h"], env=slurm.env, capture_output=True, text=True, timeout=60)
            self.assertEqual((queue.returncode, queue.stdout), (0, ""))

    def test_a_node_that_dies_is_given_up_within_the_quiet_limit(self):
        with tempfile.TemporaryDirectory() as job:
            export_job(job, 100000, local_steps=2)
            nodes = start_nodes(job)
            try:
                events = os.path.join(job, "events")
                self.assertIsNotNone(ct.wait_for(
                    lambda: all(os.path.exists(os.path.join(events, f"events-{r}.ctev")) and
                                os.path.getsize(os.path.join(events, f"events-{r}.ctev")) > 4096 for r in (0, 1)),
                    120))
                importer = subprocess.Popen([ct.CLI, "import", "--follow", events, "--quiet", "--name", "dies",
                                             "--quiet-after", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            text=True)
                time.sleep(1)
                os.killpg(nodes[1].pid, signal.SIGKILL)  # the node is gone: no error event, its file just stops
                started = time.monotonic()
                out, err = importer.communicate(timeout=120)
                waited = time.monotonic() - started
            finally:
                stop(nodes, job)
            self.assertEqual(importer.returncode, 1, err)
            run = next(r for r in ct.cli_json("list") if r["name"] == "dies")
            self.assertEqual(run["status"], "failed")
            self.assertIn("nothing came for 3 s, without an end", run["reason"])
            # Given up about the quiet limit after its last event, not at Gloo's timeout or never.
            self.assertLess(waited, 60)
            self.assertGreater(run["steps_completed"], 0)

    def test_stop_ends_the_following_and_says_the_ranks_go_on(self):
        """`commtune-cli stop` (or the app's Stop) on an imported run: the importer stops reading and
        says so; the ranks, which torchrun started, are not its to stop."""
        with tempfile.TemporaryDirectory() as job:
            export_job(job, 100000, local_steps=2)
            nodes = start_nodes(job)
            try:
                importer = subprocess.Popen([ct.CLI, "import", "--follow", os.path.join(job, "events"), "--quiet",
                                             "--name", "followed"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            text=True)
                def running():
                    rows = ct.query("SELECT r.id FROM runs r WHERE r.name = 'followed' AND r.status = 'running' "
                                    "AND EXISTS (SELECT 1 FROM step_metrics m WHERE m.run_id = r.id)")
                    return rows[0][0] if rows else None
                self.assertIsNotNone(ct.wait_for(running, 120))
                run_id = running()
                stop_cli = ct.cli("stop", run_id)
                out, err = importer.communicate(timeout=60)
                self.assertTrue(all(node.poll() is None for node in nodes))  # still training
            finally:
                stop(nodes, job)
            self.assertEqual(importer.returncode, 130, err)
            self.assertIn(f"run {run_id} cancelled", stop_cli.stderr)
            run = next(r for r in ct.cli_json("list") if r["name"] == "followed")
            self.assertEqual(run["status"], "cancelled")
            self.assertIn("its ranks were started elsewhere", run["reason"])
            self.assertGreater(run["steps_completed"], 0)
            self.assertFalse(os.path.exists(f"{ct.store()}.stop/{run_id}"))

    def test_bad_event_files_get_one_clear_line(self):
        with tempfile.TemporaryDirectory() as d:
            junk = os.path.join(d, "junk.ctev")
            with open(junk, "wb") as f:
                f.write(b"\x05\x00\x00\x00\x01hello, not a commtune event stream")
            proc = ct.cli("import", junk, check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("not a commtune event file", proc.stderr)
            self.assertNotIn("Traceback", proc.stderr)
            def hello(rank, world):  # a frame: u32 length, u8 type (1: hello), then magic, version, rank, world, pid
                body = struct.pack("<IHIII", 0x56455443, 1, rank, world, 1234)
                return struct.pack("<IB", len(body), 1) + body

            def message(text):  # type 4: a JSON message
                return struct.pack("<IB", len(text), 4) + text

            for frames, words in ((hello(0, 1 << 20), "more than 65536"), (hello(3, 2), "rank 3 of 2"),
                                  (hello(0, 1) + message(b'{"kind":"run_end","wall_s":[]}'), "malformed")):
                with open(junk, "wb") as f:
                    f.write(frames)
                proc = ct.cli("import", junk, check=False)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn(words, proc.stderr)
            proc = ct.cli("import", d + "/missing.ctev", check=False)
            self.assertNotEqual(proc.returncode, 0)
            self.assertEqual(ct.cli_json("list"), [])


if __name__ == "__main__":
    unittest.main()

"""The tuner launching a user's own script (commtune-cli run --script, sweep --script): torchrun of
the reference PyTorch on two Gloo ranks, the trial's configuration handed over in the environment,
the ranks' events streamed into a real SQLite store. A trial's stored losses equal the same script
registering PyTorch's hook by hand; a script that fails, exits, never attaches or hangs fails its
trial saying why, and leaves no process behind; a Python whose torch is missing or too old is
refused before anything starts."""
import os
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402
from test_script_trials import SCRIPT, torchrun  # noqa: E402


# On every command line of this test's trials (the script's --tag): their processes, not another test's.
TAG = uuid.uuid4().hex


def run_script(*args, steps=8, check=False, timeout=300):
    """run --script on 2 ranks of the reference PyTorch; returns (the CompletedProcess, the run id)."""
    proc = ct.cli("run", "-q", "--summary", os.devnull, "--script", SCRIPT, "--python", ct.ORACLE_PYTHON,
                  "--steps-arg", "steps", "--set", f"steps={steps}", "--set", "world_size=2",
                  "--set", f"script.args.tag={TAG}", *args,
                  check=check, timeout=timeout)
    found = re.search(r"stored as run (\d+)", proc.stderr)
    return proc, int(found.group(1)) if found else None


def settings(*assignments):
    """--set for each of these."""
    return [arg for assignment in assignments for arg in ("--set", assignment)]


def per_rank(run_id):
    rows = ct.query("SELECT rank, loss FROM step_metrics WHERE run_id = ? ORDER BY rank, step", (run_id,))
    out = {}
    for rank, loss in rows:
        out.setdefault(rank, []).append(loss)
    return out


def stored_steps():
    """The step rows stored so far (0 before the store or its tables exist)."""
    try:
        return ct.query("SELECT count(*) FROM step_metrics")[0][0]
    except sqlite3.Error:
        return 0


def script_processes():
    """The test script's processes alive now."""
    found = subprocess.run(["pgrep", "-f", TAG], capture_output=True, text=True).stdout.split()
    return [pid for pid in found if int(pid) != os.getpid()]


def none_left():
    """Whether every process of the trial is gone within seconds of its end (a SIGKILLed one is
    reaped by init a moment after)."""
    return ct.wait_for(lambda: script_processes() == [], timeout=10) is not None


# The example script's weight matrices (rows, columns) and the float count of its biases.
MATRICES, BIASES = ((64, 32), (64, 64), (4, 64)), 64 + 64 + 4


def powersgd_bytes(rank):
    """What PowerSGD allreduces per step once it compresses, from the rule of PyTorch's
    powerSGD_hook: a matrix is compressed to P (rows x rank) and Q (columns x rank) when
    (rows + columns) x rank x min_compression_rate (2) is below rows x columns; the rest, the
    biases among them, goes uncompressed. Two ranks: a ring sends each rank its payload."""
    floats = BIASES
    for rows, columns in MATRICES:
        floats += (rows + columns) * rank if (rows + columns) * rank * 2 < rows * columns else rows * columns
    return 4 * floats


def bucket_payloads(run_id):
    """Rank 0's allreduce payload per step, as (bucket, bytes): one row per bucket and step."""
    return ct.query("SELECT s.bucket, CAST(s.value AS INTEGER) FROM step_stats s JOIN stat_names n ON n.id = s.stat_id "
                    "WHERE s.run_id = ? AND s.rank = 0 AND n.name = 'comm.allreduce.bytes' ORDER BY s.step, s.bucket",
                    (run_id,))


class ScriptLaunch(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def test_a_script_sweep_stores_the_losses_of_the_script_with_pytorchs_hook_registered_by_hand(self):
        proc = ct.cli("sweep", "--name", "script-grid", "--script", SCRIPT, "--python", ct.ORACLE_PYTHON,
                      "--steps-arg", "steps", "--set", "steps=8", "--set", "world_size=2",
                      "--set", "hook.name=powersgd", "--axis", "hook.matrix_approximation_rank=1,2",
                      "--axis", "hook.start_powerSGD_iter=2,4", timeout=900)
        self.assertIn("5 succeeded", proc.stderr)
        runs = ct.query("SELECT id, config FROM runs ORDER BY id")
        self.assertEqual(len(runs), 5)
        import json
        with tempfile.TemporaryDirectory() as folder:
            for run_id, config in runs:
                config = json.loads(config)
                self.assertEqual(config["script"]["path"], SCRIPT)
                hook = config["hook"]
                wire = [w for (w,) in ct.query("SELECT wire_bytes FROM step_metrics WHERE run_id = ? AND rank = 0 "
                                               "ORDER BY step", (run_id,))]
                if hook["name"] == "allreduce":  # the baseline: 4 bytes per parameter, a ring of two sends it all
                    self.assertEqual(wire, [4 * 6532] * 8)
                    continue
                rank, start = hook["matrix_approximation_rank"], hook["start_powerSGD_iter"]
                by_hand, _, _ = torchrun(folder, "--direct", "powersgd", "--rank-r", str(rank),
                                         "--start-iter", str(start), "--steps", "8")
                with self.subTest(rank=rank, start=start):
                    self.assertEqual(per_rank(run_id), by_hand)  # bit for bit
                    self.assertEqual(wire[:start], [4 * 6532] * start)  # before the start: a plain allreduce
                    # then P and Q, each collective under the one bucket (Q's allreduce is a callback's)
                    self.assertEqual(wire[start:], [powersgd_bytes(rank)] * (8 - start))
                    self.assertEqual(bucket_payloads(run_id)[start:], [(0, powersgd_bytes(rank))] * (8 - start))
        # The network model reads script trials as engine runs: every trial predicted, the baseline's verdict.
        predicted = json.loads(ct.cli("predict", "--sweep", "1", "--network", "10gbit", "--json").stdout)
        self.assertEqual(len(predicted["runs"]), 5)
        for run in predicted["runs"]:
            with self.subTest(run=run["run_id"]):
                self.assertGreater(run["predictions"][0]["step_s"], 0)
                bucket, = run["profile"]["buckets"]
                self.assertGreater(bucket["chain_s"], 0)
                self.assertEqual(run["profile"]["step_collectives"], [])
        recommended = json.loads(ct.cli("recommend", "--sweep", "1", "--network", "10gbit", "--json").stdout)
        self.assertEqual(recommended["baseline_run"], 1)
        self.assertEqual(sorted(c["run_id"] for c in recommended["candidates"]), [1, 2, 3, 4, 5])
        self.assertTrue(all(c["prediction"]["step_s"] > 0 for c in recommended["candidates"]))

    def test_a_script_trial_exports_as_an_engine_run_does(self):
        proc, run_id = run_script("--set", "hook.name=powersgd", "--set", "hook.matrix_approximation_rank=2",
                                  "--set", "hook.start_powerSGD_iter=3", check=True)
        trained = per_rank(run_id)
        with tempfile.TemporaryDirectory() as folder:
            # Production is the same script: attach does nothing there, the exported hook is registered instead.
            ct.cli("export", "production", "--run", str(run_id), "--out", folder + "/production")
            exported, _, _ = torchrun(folder, "--exported", folder + "/production/use_powersgd.py", "--steps", "8")
            self.assertEqual(exported, trained)  # bit for bit
            # The launch scripts start the trial itself on nodes: torchrun of the script, its events to import.
            ct.cli("export", "launch", "--run", str(run_id), "--out", folder + "/job", "--nodes", "1",
                   "--ranks-per-node", "2")
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            job = subprocess.run(["sh", folder + "/job/launch_torchrun.sh"], capture_output=True, text=True,
                                 env=dict(os.environ, RDZV_ENDPOINT=f"127.0.0.1:{port}"), timeout=300)
            # PyTorch's Gloo teardown can abort a rank after its last collective; the trial's events are whole.
            if job.returncode != 0:
                self.assertTrue(ct.only_pytorchs_teardown_failed(job.stdout + job.stderr,
                                                                 ct.printed_losses(job.stdout), 2), job.stderr[-3000:])
            imported = ct.cli("import", folder + "/job/events")
            found = re.search(r"run (\d+)", imported.stdout + imported.stderr)
            self.assertIsNotNone(found, imported.stdout + imported.stderr)
            self.assertEqual(per_rank(int(found.group(1))), trained)

    def test_the_scripts_model_and_data_as_an_engine_run_train_as_the_script_does(self):
        # The engine equals PyTorch's DDP bit for bit on a TorchScript file and tensors for these hooks
        # (docs/exactness.md): the script's own eager model and DataLoader, as a trial, must equal it too.
        # Without label smoothing, which the engine's loss does not have; the rest is the engine's kind of job:
        # a DistributedSampler shuffled with the seed, drop_last, SGD with momentum, a linear warm-up.
        hooks = (["hook.name=allreduce"], ["hook.name=fp16_compress"],
                 ["hook.name=powersgd", "hook.matrix_approximation_rank=1", "hook.start_powerSGD_iter=2"])
        with tempfile.TemporaryDirectory() as folder:
            subprocess.run([ct.ORACLE_PYTHON, SCRIPT, "--plain", "--save-for-engine", folder], check=True, timeout=120)
            engine = ["model.name=torchscript", f"model.path={folder}/model.pt", "data.name=tensors",
                      f"data.path={folder}/data.pt", "data.batch_size=16", "data.shuffle=true", "data.drop_last=true",
                      "optimizer.lr=0.05", "optimizer.momentum=0.9", "optimizer.warmup_steps=4", "threads=1",
                      "seed=0", "world_size=2", "steps=8"]
            for hook in hooks:
                with self.subTest(hook=hook):
                    _, script_run = run_script(*settings(*hook, "script.args.label-smoothing=0"), check=True)
                    found = re.search(r"stored as run (\d+)",
                                      ct.cli("run", "-q", "--summary", os.devnull, *settings(*hook, *engine)).stderr)
                    trained = per_rank(script_run)
                    self.assertEqual([len(trained[r]) for r in (0, 1)], [8, 8])
                    self.assertEqual(per_rank(int(found.group(1))), trained)  # bit for bit

    def test_a_failing_exiting_unattached_or_hanging_script_fails_its_trial_saying_why(self):
        cases = [
            (("--", "--fail-at", "3"), r"rank 1 failed: ValueError: the batch at step 3 is corrupt"),
            (("--", "--exit-before-attach", "4"),
             r"rank \d exited with code 4; its stderr ends: train_ddp.py: cannot open the dataset"),
            (("--", "--no-attach"), r"commtune.log was called before commtune.attach"),
            (("--", "--plain"), r"the script ended without calling commtune.attach"),
            (("--set", "script.timeout_s=20", "--", "--hang-at", "3"),
             r"its events stopped after step 2 and nothing came for 20 s"),
        ]
        for args, reason in cases:
            with self.subTest(args=args):
                proc, run_id = run_script(*args)
                self.assertNotEqual(proc.returncode, 0)
                self.assertRegex(proc.stderr, reason)
                status, stored_reason = ct.query("SELECT status, reason FROM runs WHERE id = ?", (run_id,))[0]
                self.assertEqual(status, "failed")
                self.assertRegex(stored_reason, reason)
                self.assertTrue(none_left(), script_processes())

    def test_a_script_failing_after_its_last_step_fails_its_trial_unless_pytorchs_teardown_aborted_it(self):
        # A final save that fails fails the trial; PyTorch's Gloo teardown aborting a rank after every rank
        # ended its run (a few runs in a hundred with Python hooks on a loaded machine) loses nothing measured.
        proc, run_id = run_script("--", "--exit-after-loop", "3")
        self.assertNotEqual(proc.returncode, 0)
        status, reason = ct.query("SELECT status, reason FROM runs WHERE id = ?", (run_id,))[0]
        self.assertEqual(status, "failed")
        self.assertRegex(reason, r"every rank ended its run, then the script exited with code 1: rank 0 exited "
                                 r"with code 3; its stderr ends: train_ddp.py: cannot save the checkpoint")
        proc, run_id = run_script("--set", "hook.name=fp16_compress", "--", "--abort-after-loop")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        status, reason = ct.query("SELECT status, reason FROM runs WHERE id = ?", (run_id,))[0]
        self.assertEqual(status, "succeeded")
        self.assertIn("then PyTorch's teardown aborted rank 0", reason)
        self.assertEqual(len(per_rank(run_id)[0]), 8)
        self.assertTrue(none_left(), script_processes())

    def test_a_killed_rank_or_ctrl_c_ends_every_process_of_the_trial(self):
        for how in ("kill a rank", "ctrl-c"):
            with self.subTest(how=how):
                ct.fresh_store()
                proc = subprocess.Popen(
                    [ct.CLI, "run", "-q", "--summary", os.devnull, "--script", SCRIPT, "--python", ct.ORACLE_PYTHON,
                     "--steps-arg", "steps", "--set", "steps=1000000", "--set", "world_size=2",
                     "--set", f"script.args.tag={TAG}"],
                    stderr=subprocess.PIPE, text=True)
                self.assertIsNotNone(ct.wait_for(lambda: stored_steps() > 20, timeout=120))
                if how == "ctrl-c":
                    proc.send_signal(2)
                else:
                    os.kill(int(max(script_processes(), key=int)), 9)  # the youngest: a rank, not torchrun
                _, err = proc.communicate(timeout=120)
                status, reason = ct.query("SELECT status, reason FROM runs ORDER BY id DESC LIMIT 1")[0]
                if how == "ctrl-c":
                    self.assertEqual((proc.returncode, status), (130, "cancelled"))
                else:
                    self.assertEqual((proc.returncode, status), (1, "failed"))
                    self.assertRegex(reason, r"rank \d was killed by signal 9 \(SIGKILL\)")
                self.assertTrue(none_left(), script_processes())

    def test_a_python_without_a_usable_torch_is_refused_before_anything_starts(self):
        with tempfile.TemporaryDirectory() as folder:
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", folder + "/bare"], check=True)
            bare = ct.cli("run", "--script", SCRIPT, "--python", folder + "/bare/bin/python", check=False)
            self.assertEqual(bare.returncode, 2)
            self.assertIn("script.python: " + folder + "/bare/bin/python has no torch", bare.stderr)
        if os.path.exists("/usr/bin/python3"):  # Debian's, with its torch 1.13
            old = ct.cli("run", "--script", SCRIPT, "--python", "/usr/bin/python3", check=False)
            self.assertEqual(old.returncode, 2)
            self.assertRegex(old.stderr, r"script.python: /usr/bin/python3 has torch 1\.13[^ ]*, older than 2\.4")
        self.assertEqual(ct.query("SELECT count(*) FROM runs")[0][0], 0)  # nothing was stored

    def test_script_options_without_a_script_are_refused_naming_them(self):
        proc = ct.cli("run", "--python", "python3", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--python: belongs to a script run", proc.stderr)


if __name__ == "__main__":
    unittest.main()

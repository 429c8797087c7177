"""The engine end to end: real worker processes over loopback Gloo, driven
through commtune-cli exactly as a user drives it."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

import torch  # noqa: E402  (the reference interpreter's torch loads the gradient dumps)


class AveragedGradients(unittest.TestCase):
    def check_mean(self, world):
        with tempfile.TemporaryDirectory() as d:
            dumps = os.path.join(d, "grads")
            # A small bucket cap gives several buckets once they are rebuilt after step 0.
            ct.run_commtune(d, {"world_size": world, "steps": 3, "ddp.bucket_cap_mb": 0.5,
                                "debug.dump_grads_steps": 3, "debug.dump_dir": dumps})
            for step in range(3):
                files = [torch.load(os.path.join(dumps, f"grads-rank{r}-step{step}.pt")) for r in range(world)]
                names = [k[len("local/"):] for k in files[0] if k.startswith("local/")]
                self.assertEqual(len(names), 6)
                for name in names:
                    local = torch.stack([f["local/" + name].double() for f in files])
                    mean = local.mean(0)
                    scale = mean.abs().max().item()
                    for r in range(world):
                        reduced = files[r]["reduced/" + name]
                        # Tolerance: float32 rounding of world-1 additions.
                        err = (reduced.double() - mean).abs().max().item()
                        self.assertLessEqual(err, 4 * world * 2 ** -24 * scale + 1e-12,
                                             f"step {step} {name} rank {r}: |reduced - mean| = {err}")
                        self.assertTrue(torch.equal(reduced, files[0]["reduced/" + name]),
                                        f"ranks disagree on {name}")
                    # The dumps are real: local gradients differ between ranks.
                    self.assertFalse(torch.equal(files[0]["local/" + name], files[1]["local/" + name]))

    def test_two_ranks_average_exactly(self):
        self.check_mean(2)

    def test_four_ranks_average_exactly(self):
        self.check_mean(4)

    def test_allreduce_hook_matches_no_hook_bit_for_bit(self):
        for world in (2, 4):
            with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
                common = {"world_size": world, "steps": 25, "ddp.bucket_cap_mb": 1}
                with_hook = ct.run_commtune(a, dict(common, **{"hook.name": "allreduce"}))
                without = ct.run_commtune(b, dict(common, **{"hook.name": "none"}))
                self.assertEqual(with_hook.losses(), without.losses())
                self.assertEqual(with_hook.summary["param_digest"], without.summary["param_digest"])
                self.assertTrue(with_hook.summary["ranks_in_sync"])

    def test_traffic_is_accounted_per_hook(self):
        with tempfile.TemporaryDirectory() as d:
            full = ct.run_commtune(d, {"steps": 12}).summary["traffic"]
        with tempfile.TemporaryDirectory() as d:
            half = ct.run_commtune(d, {"steps": 12, "hook.name": "bf16_compress"}).summary["traffic"]
        with tempfile.TemporaryDirectory() as d:
            none = ct.run_commtune(d, {"steps": 12, "hook.name": "noop"}).summary["traffic"]
        params = 256 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10
        # Ring allreduce on 2 ranks: each rank sends 2 * (2-1)/2 * 4 bytes per parameter.
        self.assertEqual(full["wire_bytes_per_step"], 4 * params)
        self.assertEqual(full["uncompressed_bytes_per_step"], 4 * params)
        self.assertAlmostEqual(half["compression_ratio"], 2.0, delta=1e-5)
        self.assertEqual(none["wire_bytes_per_step"], 0)


class Failures(unittest.TestCase):
    def test_killed_rank_fails_the_run_within_seconds(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics, summary_path = ct.start_commtune(d, {"steps": 10 ** 7})
            try:
                workers = ct.wait_until_training(proc, metrics, 2)
                os.kill(workers[1], signal.SIGKILL)
                took = ct.wait_for(lambda: proc.poll() is not None, timeout=10)
                self.assertIsNotNone(took, "the run did not end within 10 s of a rank's death")
                self.assertEqual(proc.returncode, 1)
                summary = json.load(open(summary_path))
                self.assertEqual(summary["status"], "failed")
                self.assertEqual(summary["failed_rank"], 1)
                self.assertIn("SIGKILL", summary["reason"])
                self.assertIn("rank 1 failed", proc.stderr.read())
                for pid in workers:
                    self.assertFalse(ct.is_running(pid), f"worker {pid} outlived the run")
            finally:
                proc.kill()
                proc.wait()

    def test_killed_launcher_takes_its_workers_down(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics, _ = ct.start_commtune(d, {"steps": 10 ** 7, "world_size": 3})
            workers = ct.wait_until_training(proc, metrics, 3)
            proc.kill()
            proc.wait()
            gone = ct.wait_for(lambda: not any(ct.is_running(p) for p in workers), timeout=5)
            self.assertIsNotNone(gone, "workers survived their launcher")

    def test_interrupt_cancels_cleanly(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics, summary_path = ct.start_commtune(d, {"steps": 10 ** 7})
            workers = ct.wait_until_training(proc, metrics, 2)
            proc.send_signal(signal.SIGINT)
            self.assertIsNotNone(ct.wait_for(lambda: proc.poll() is not None, timeout=10))
            self.assertEqual(proc.returncode, 130)
            self.assertEqual(json.load(open(summary_path))["status"], "cancelled")
            for pid in workers:
                self.assertFalse(ct.is_running(pid))

    def test_stop_from_another_terminal_cancels_cleanly(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics, summary_path = ct.start_commtune(d, {"steps": 10 ** 7})
            workers = ct.wait_until_training(proc, metrics, 2)
            run_id = ct.query("SELECT id FROM runs WHERE status = 'running' ORDER BY id DESC LIMIT 1")[0][0]
            stop = ct.cli("stop", run_id, "--wait", 60)
            self.assertIn(f"run {run_id} cancelled", stop.stderr)
            self.assertIsNotNone(ct.wait_for(lambda: proc.poll() is not None, timeout=10))
            self.assertEqual(proc.returncode, 130)
            self.assertEqual(json.load(open(summary_path))["status"], "cancelled")
            for pid in workers:
                self.assertFalse(ct.is_running(pid))
            self.assertFalse(os.path.exists(f"{ct.store()}.stop/{run_id}"))
            # A run that is not running, or no run at all: said so, and nothing is filed.
            ended = ct.cli("stop", run_id, check=False)
            self.assertEqual(ended.returncode, 1)
            self.assertIn(f"run {run_id} is not running (cancelled)", ended.stderr)
            missing = ct.cli("stop", 987654, check=False)
            self.assertEqual(missing.returncode, 1)
            self.assertIn("no run 987654 in", missing.stderr)
            self.assertEqual(os.listdir(f"{ct.store()}.stop"), [])

    def test_hung_rank_times_out(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics, summary_path = ct.start_commtune(d, {"steps": 10 ** 7, "timeout_s": 2})
            try:
                workers = ct.wait_until_training(proc, metrics, 2)
                os.kill(workers[1], signal.SIGSTOP)  # alive but silent: only the timeout can tell
                took = ct.wait_for(lambda: proc.poll() is not None, timeout=20)
                self.assertIsNotNone(took, "a silent rank hung the run past its timeout")
                summary = json.load(open(summary_path))
                self.assertEqual(summary["status"], "failed")
                # The rank that stopped answering is blamed, not the healthy one that timed out waiting.
                self.assertEqual(summary["failed_rank"], 1, summary["reason"])
                self.assertIn("rank 1 stopped answering", summary["reason"])
                self.assertIn("its process was stopped", summary["reason"])
                for pid in workers:
                    self.assertFalse(ct.is_running(pid))
            finally:
                proc.kill()
                proc.wait()

    def test_failing_rank_is_named_with_its_error(self):
        with tempfile.TemporaryDirectory() as d:
            started = time.monotonic()
            run = ct.run_commtune(d, {"world_size": 3, "steps": 1000, "debug.fail_rank": 2, "debug.fail_at_step": 7},
                                  check=False)
            self.assertLess(time.monotonic() - started, 15)
            self.assertEqual(run.returncode, 1)
            self.assertEqual(run.summary["status"], "failed")
            self.assertEqual(run.summary["failed_rank"], 2)
            self.assertIn("injected failure at step 7", run.summary["reason"])
            # Every step a rank finished is reported, also by the ranks the launcher stopped:
            # rank 2 finished 7; the others at least the 6 that rank 2 took part in to the end.
            steps = [len(rank) for rank in run.losses()]
            self.assertEqual(steps[2], 7)
            self.assertGreaterEqual(min(steps[:2]), 6)

    def test_bad_values_name_the_field(self):
        cases = [
            ({"optimizer.lr": "-1"}, "optimizer.lr"),
            ({"hook.name": "powersgd2"}, "hook.name"),
            ({"model.hiden": "3"}, "model.hiden"),
            ({"world_size": "-2"}, "world_size"),
            ({"model.name": "transformer_lm", "steps": 2}, "model.name"),  # found only when the model meets the data
            ({"weights.init": "/nonexistent.pt", "steps": 2}, "weights.init"),
        ]
        for overrides, field in cases:
            with tempfile.TemporaryDirectory() as d:
                run = ct.run_commtune(d, overrides, check=False)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertIn(field, run.stderr)

    def test_malformed_config_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.json")
            with open(path, "w") as f:
                f.write('{"steps": 10,, }')
            proc = subprocess.run([ct.CLI, "run", "-c", path], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("not valid JSON", proc.stderr)


class Launching(unittest.TestCase):
    def test_workers_run_under_torchrun(self):
        """The worker reads torchrun's variables: PyTorch's own launcher runs it."""
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, COMMTUNE_EVENT_FILE=os.path.join(d, "events-{rank}.ctev"))
            cmd = [ct.ORACLE_PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                   "--log_dir", os.path.join(d, "logs"), "--no_python",
                   ct.WORKER, "--set", "steps=12", "--set", "hook.name=fp16_compress"]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            files = [os.path.join(d, f"events-{r}.ctev") for r in range(2)]
            out = subprocess.run([ct.CLI, "summarize", *files, "--summary", os.path.join(d, "s.json")],
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            summary = json.load(open(os.path.join(d, "s.json")))
            self.assertEqual(summary["steps"]["completed"], 12)
            self.assertTrue(summary["ranks_in_sync"])
            self.assertAlmostEqual(summary["traffic"]["compression_ratio"], 2.0, delta=1e-5)

    def test_ranks_forked_from_the_zygote_are_what_exec_would_start(self):
        """Local ranks are forked from a worker that has loaded libtorch (core/tuner/launch/worker_zygote.h): each
        looks and trains as an exec'd one, and nothing is left when the launcher goes."""
        with tempfile.TemporaryDirectory() as d:
            proc, metrics, _ = ct.start_commtune(d, {"steps": 100000, "model.hidden": 64})
            ranks = ct.wait_until_training(proc, metrics, 2)
            others = [p for p in ct.children_of(proc.pid) if p not in ranks]
            for rank, pid in enumerate(ranks):
                blocks = {}
                for name in ("cmdline", "environ"):  # each string NUL-terminated, nothing after the last
                    with open(f"/proc/{pid}/{name}", "rb") as f:
                        raw = f.read()
                    self.assertTrue(raw.endswith(b"\0") and b"\0\0" not in raw, f"{name}: {raw[-64:]!r}")
                    blocks[name] = raw[:-1].split(b"\0")
                self.assertEqual(blocks["cmdline"][:2], [ct.WORKER.encode(), b"--config"])
                self.assertEqual(len(blocks["cmdline"]), 3)
                env = dict(i.split(b"=", 1) for i in blocks["environ"])
                self.assertEqual((env[b"RANK"], env[b"WORLD_SIZE"]), (str(rank).encode(), b"2"))
                self.assertNotIn(b"COMMTUNE_ZYGOTE_ROOM", env)
                self.assertEqual(os.getpgid(pid), pid)  # its own group: a terminal's Ctrl-C reaches the launcher only
            self.assertEqual(len(others), 1)
            with open(f"/proc/{others[0]}/cmdline", "rb") as f:
                self.assertEqual(f.read().split(b"\0")[:2], [ct.WORKER.encode(), b"--zygote"])
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            gone = ct.wait_for(lambda: not any(ct.is_running(p) for p in ranks + others), 15)
            self.assertIsNotNone(gone, "a rank or the zygote outlived a killed launcher")
        losses = {}
        for zygote in ("1", "0"):
            os.environ["COMMTUNE_WORKER_ZYGOTE"] = zygote
            try:
                with tempfile.TemporaryDirectory() as d:
                    losses[zygote] = ct.run_commtune(d, {"steps": 20, "world_size": 3, "model.hidden": 64,
                                                         "cpu_affinity": "cores"}, extra_args=["--no-store"]).losses()
            finally:
                del os.environ["COMMTUNE_WORKER_ZYGOTE"]
        self.assertEqual(losses["1"], losses["0"])

    def test_default_job_learns(self):
        with tempfile.TemporaryDirectory() as d:
            run = ct.run_commtune(d, {"steps": 150})
            s = run.summary
            self.assertEqual(s["status"], "succeeded")
            self.assertLess(s["loss"]["final"], 0.8 * s["loss"]["initial"])
            self.assertEqual(s["world_size"], 2)
            self.assertEqual(s["backend"], "gloo")
            # Step 0 reduces one bucket; later steps use buckets rebuilt in gradient-ready order.
            self.assertEqual(s["buckets"][0]["parameters"][0], "output.bias")


if __name__ == "__main__":
    unittest.main()

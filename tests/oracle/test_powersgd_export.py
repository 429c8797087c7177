"""An exported PowerSGD configuration in a production PyTorch job: Debian's
PyTorch 1.13 loads the state file with weights_only=True, builds the
PowerSGDState with the exported snippet, and drives a real 2-process DDP run
with powerSGD_hook."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import commtune_testing as ct  # noqa: E402

REFERENCE = os.path.join(HERE, "commtune_reference.py")
RUN = {"hook.name": "powersgd", "hook.matrix_approximation_rank": 2, "hook.start_powerSGD_iter": 3,
       "model.hidden": 64, "data.features": 32, "ddp.first_bucket_cap_mb": 100, "ddp.bucket_cap_mb": 100}


def export(*args):
    proc = subprocess.run([ct.CLI, "export", "powersgd", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc.stdout.split()


def replay(workdir, state_file, init, extra=(), steps=None):
    out = os.path.join(workdir, "reference.json")
    config = os.path.join(workdir, "summary.json")
    if steps is not None:  # the same run, continued to `steps`
        summary = json.load(open(config))
        summary["config"]["steps"] = steps
        config = os.path.join(workdir, "continued.json")
        json.dump(summary, open(config, "w"))
    proc = subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", config,
                           "--init", init, "--out", out, "--powersgd-state", state_file, *extra],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(proc.stderr[-3000:])
    return json.load(open(out))


class ExportToPyTorch(unittest.TestCase):
    def test_exported_state_reproduces_the_run_in_pytorch_ddp(self):
        with tempfile.TemporaryDirectory() as d:
            init = os.path.join(d, "init.pt")
            run = ct.run_commtune(d, dict(RUN, **{"steps": 15, "weights.save_initial": init}))
            files = export("--from", os.path.join(d, "summary.json"), "--out", os.path.join(d, "export"))
            state_file = os.path.join(d, "export", "powersgd_state.pt")
            self.assertIn(state_file, files)
            theirs = replay(d, state_file, init)
            # The same hyperparameters in PyTorch's own hook: the same run, bit for bit.
            self.assertEqual(theirs["losses"], run.losses())
            self.assertEqual([r["powersgd_iter"] for r in theirs["ranks"]], [15, 15])

    def check_docstring_lines(self, folder, expected_file):
        """The two lines of use_powersgd.py's docstring, run unmodified beside the files."""
        doc = open(os.path.join(folder, "use_powersgd.py")).read().split('"""')[1]
        lines = [line.strip() for line in doc.splitlines() if line.startswith("    ")]
        self.assertEqual(len(lines), 2, doc)
        self.assertIn(f'"{expected_file}"', lines[0])
        code = ("import torch\nfrom torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState\n"
                + "\n".join(lines) + "\n"
                "print(state.matrix_approximation_rank, state.start_powerSGD_iter, state.min_compression_rate, "
                "state.orthogonalization_epsilon, state.use_error_feedback, d['hook'], d['wrapper'])\n")
        proc = subprocess.run([ct.ORACLE_PYTHON, "-c", code], capture_output=True, text=True, cwd=folder)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout.split()

    def test_two_lines_make_the_state(self):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, dict(RUN, **{"steps": 4, "hook.orthogonalization_epsilon": 1e-7,
                                           "hook.min_compression_rate": 1.5, "checkpoint.dir": d}))
            export("--from", os.path.join(d, "summary.json"), "--out", os.path.join(d, "plain"))
            self.assertEqual(self.check_docstring_lines(os.path.join(d, "plain"), "powersgd_state.pt"),
                             ["2", "3", "1.5", "1e-07", "True", "powerSGD_hook", "none"])
            # With runtime state the files are per rank, and the docstring says so.
            export("--from", os.path.join(d, "step-000004"), "--runtime-state", "--out", os.path.join(d, "runtime"))
            self.assertEqual(self.check_docstring_lines(os.path.join(d, "runtime"), "powersgd_state-rank0.pt"),
                             ["2", "3", "1.5", "1e-07", "True", "powerSGD_hook", "none"])

    def test_pytorch_continues_from_a_checkpoint_bit_for_bit(self):
        """commtune stops at step 8; PyTorch's DDP takes over through the exported
        use_powersgd.py (make_ddp, register, resume) with the checkpoint's weights and
        momentum; its losses are those of commtune's own resumed run, bit for bit."""
        with tempfile.TemporaryDirectory() as d:
            init = os.path.join(d, "init.pt")
            checkpoints = os.path.join(d, "checkpoints")
            ct.run_commtune(d, dict(RUN, **{"steps": 8, "weights.save_initial": init, "checkpoint.dir": checkpoints}))
            folder = os.path.join(checkpoints, "step-000008")
            files = export("--from", folder, "--runtime-state", "--out", os.path.join(d, "export"))
            self.assertEqual(sum(f.endswith(".pt") for f in files), 2)  # one per rank
            check = ("import torch\n"
                     f"d = torch.load({os.path.join(d, 'export', 'powersgd_state-rank1.pt')!r}, weights_only=True)\n"
                     "rt = d['runtime']\n"
                     "print(rt['iter'], rt['rank'], sorted(rt['error_dict']), rt['rng_key'].numel())\n")
            out = subprocess.run([ct.ORACLE_PYTHON, "-c", check], capture_output=True, text=True, check=True).stdout
            self.assertEqual(out.split(), ["8", "1", "[0]", "624"])

            with tempfile.TemporaryDirectory() as r:
                mine = ct.run_commtune(r, dict(RUN, **{"steps": 17, "checkpoint.resume": folder}),
                                       extra_args=["--no-store"]).losses()
            theirs = replay(d, os.path.join(d, "export", "powersgd_state-rank{rank}.pt"), init,
                            ["--resume", folder], steps=17)
            self.assertEqual([len(losses) for losses in mine], [9, 9])
            for rank in range(2):
                self.assertEqual(theirs["losses"][rank], mine[rank], f"rank {rank}")
            self.assertEqual([r["powersgd_iter"] for r in theirs["ranks"]], [17, 17])
            self.assertEqual([r["powersgd_buckets_with_error"] for r in theirs["ranks"]], [[0], [0]])

    def test_only_powersgd_runs_export(self):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, {"steps": 2})
            proc = subprocess.run([ct.CLI, "export", "powersgd", "--from", os.path.join(d, "summary.json"), "--out", d],
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("hook.name", proc.stderr)


class ExportedFilesRunUnmodified(unittest.TestCase):
    """Every kind of exported Python file, run as written in a PyTorch 1.13 job on
    CPU/Gloo: make_ddp (no device_ids off the GPU), register, train."""

    def run_exported(self, overrides, command, file):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, dict({"steps": 3}, **overrides), extra_args=["--no-store"])
            out = os.path.join(d, "export")
            proc = subprocess.run([ct.CLI, "export", command, "--from", os.path.join(d, "summary.json"), "--out", out],
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            losses_path = os.path.join(d, "losses.json")
            proc = subprocess.run([ct.ORACLE_PYTHON, os.path.join(HERE, "run_exported.py"), os.path.join(out, file),
                                   losses_path], capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            losses = json.load(open(losses_path))
            self.assertEqual(len(losses), 6)
            self.assertNotEqual(losses[0], losses[-1])  # it trained

    def test_default_hook_with_wrapper(self):
        self.run_exported({"hook.name": "allreduce", "hook.wrapper": "fp16"}, "production", "use_hook.py")

    def test_ddp_builtin_reduction(self):
        self.run_exported({"hook.name": "none"}, "production", "use_hook.py")

    def test_post_local_sgd(self):
        self.run_exported({"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 2, "hook.period": 2},
                          "production", "use_post_local_sgd.py")

    def test_post_local_sgd_with_hierarchical_averaging(self):
        self.run_exported({"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 2, "hook.hierarchy": "2:1,4:2"},
                          "production", "use_post_local_sgd.py")

    def test_powersgd_hyperparameters(self):
        self.run_exported(RUN, "powersgd", "use_powersgd.py")


if __name__ == "__main__":
    unittest.main()

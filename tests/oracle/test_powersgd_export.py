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


def replay(workdir, state_file, init):
    out = os.path.join(workdir, "reference.json")
    proc = subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(workdir, "summary.json"),
                           "--init", init, "--out", out, "--powersgd-state", state_file],
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
            # The same hyperparameters in PyTorch's own hook: the same run, step for step.
            for mine, ref in zip(run.losses(), theirs["losses"]):
                for a, b in zip(mine, ref):
                    self.assertLessEqual(abs(a - b), 1e-6 * abs(b))
            self.assertEqual([r["powersgd_iter"] for r in theirs["ranks"]], [15, 15])

    def test_two_lines_make_the_state(self):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, dict(RUN, **{"steps": 4, "hook.orthogonalization_epsilon": 1e-7,
                                           "hook.min_compression_rate": 1.5}))
            export("--from", os.path.join(d, "summary.json"), "--out", d)
            code = ("import torch\nfrom torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState\n"
                    f"d = torch.load({os.path.join(d, 'powersgd_state.pt')!r}, weights_only=True)\n"
                    "state = PowerSGDState(None, **{k: v.item() if torch.is_tensor(v) else v for k, v in "
                    "d['hyperparameters'].items()})\n"
                    "print(state.matrix_approximation_rank, state.start_powerSGD_iter, state.min_compression_rate, "
                    "state.orthogonalization_epsilon, state.use_error_feedback, d['hook'], d['wrapper'])\n")
            out = subprocess.run([ct.ORACLE_PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout
            self.assertEqual(out.split(), ["2", "3", "1.5", "1e-07", "True", "powerSGD_hook", "none"])

    def test_runtime_state_lets_a_job_continue(self):
        with tempfile.TemporaryDirectory() as d:
            init = os.path.join(d, "init.pt")
            ct.run_commtune(d, dict(RUN, **{"steps": 12, "weights.save_initial": init,
                                           "checkpoint.dir": os.path.join(d, "checkpoints")}))
            files = export("--from", os.path.join(d, "summary.json"), "--runtime-state", "--out",
                           os.path.join(d, "export"))
            self.assertEqual(sum(f.endswith(".pt") for f in files), 2)  # one per rank
            check = ("import torch\n"
                     f"d = torch.load({os.path.join(d, 'export', 'powersgd_state-rank1.pt')!r}, weights_only=True)\n"
                     "rt = d['runtime']\n"
                     "print(rt['iter'], rt['rank'], sorted(rt['error_dict']), rt['rng_key'].numel())\n")
            out = subprocess.run([ct.ORACLE_PYTHON, "-c", check], capture_output=True, text=True, check=True).stdout
            self.assertEqual(out.split(), ["12", "1", "[0]", "624"])
            # A fresh job: after its first step it takes over iteration 12, the generator and the memories.
            theirs = replay(d, os.path.join(d, "export", "powersgd_state-rank{rank}.pt"), init)
            steps = len(theirs["losses"][0])
            self.assertEqual([r["powersgd_iter"] for r in theirs["ranks"]], [12 + steps - 1] * 2)
            self.assertEqual([r["powersgd_buckets_with_error"] for r in theirs["ranks"]], [[0], [0]])

    def test_only_powersgd_runs_export(self):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, {"steps": 2})
            proc = subprocess.run([ct.CLI, "export", "powersgd", "--from", os.path.join(d, "summary.json"), "--out", d],
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("hook.name", proc.stderr)


if __name__ == "__main__":
    unittest.main()

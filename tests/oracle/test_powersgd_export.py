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
    state = ["--powersgd-state", state_file] if state_file else []
    proc = subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", config, "--init", init, "--out", out, *state,
                           *extra],
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
        lines = [line.strip() for line in doc.splitlines()
                 if line.startswith("    ") and "torch.distributed.run" not in line]
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
    """Every kind of exported Python file, checked the way its own docstring says, literally:
    `python3 -m torch.distributed.run --nproc_per_node 2 ... FILE` in the export folder, with
    PyTorch 2.11 on CPU/Gloo. The job trains and every rank exits 0 (torchrun's status)."""

    def export_and_check(self, overrides, command, file, runtime_state=False):
        with tempfile.TemporaryDirectory() as d:
            settings = dict({"steps": 3}, **overrides)
            if runtime_state:
                settings["checkpoint.dir"] = os.path.join(d, "ck")
            ct.run_commtune(d, settings, extra_args=["--no-store"])
            out = os.path.join(d, "export")
            source = os.path.join(d, "ck", "step-000003") if runtime_state else os.path.join(d, "summary.json")
            proc = subprocess.run([ct.CLI, "export", command, "--from", source, "--out", out],
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            check = ct.documented_check_command(os.path.join(out, file))
            return ct.shell_as_documented(check, out, timeout=300)

    def assert_checks(self, overrides, command, file, runtime_state=False):
        proc = self.export_and_check(overrides, command, file, runtime_state)
        self.assertEqual(proc.returncode, 0, proc.stdout[-2000:] + proc.stderr[-3000:])
        line = next(line for line in proc.stdout.splitlines() if f"{file}: " in line)
        first, last = (float(v) for v in line.rsplit("loss ", 1)[1].split(" -> "))
        self.assertNotEqual(first, last, line)  # it trained
        self.assertIn("(gloo)", line)
        self.assertNotIn("terminate called", proc.stderr)

    def test_default_hook_with_wrapper(self):
        self.assert_checks({"hook.name": "allreduce", "hook.wrapper": "fp16"}, "production", "use_hook.py")

    def test_bf16_hook_and_wrapper_on_gloo(self):
        self.assert_checks({"hook.name": "bf16_compress"}, "production", "use_hook.py")
        self.assert_checks({"hook.name": "allreduce", "hook.wrapper": "bf16"}, "production", "use_hook.py")

    def test_ddp_builtin_reduction(self):
        self.assert_checks({"hook.name": "none"}, "production", "use_hook.py")

    def test_post_local_sgd(self):
        self.assert_checks({"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 2, "hook.period": 2},
                           "production", "use_post_local_sgd.py")

    def test_post_local_sgd_with_hierarchical_averaging(self):
        self.assert_checks({"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 2, "hook.hierarchy": "2:1,4:2"},
                           "production", "use_post_local_sgd.py")

    def test_powersgd_with_and_without_runtime_state(self):
        self.assert_checks(RUN, "powersgd", "use_powersgd.py")
        self.assert_checks(RUN, "powersgd", "use_powersgd.py", runtime_state=True)

    def test_wrapped_powersgd_runs_on_gloo(self):
        """PyTorch 2.x runs PowerSGD in a fp16 or bf16 wrapper on the CPU (1.13 had no half matrix
        products there, nor a bf16 sum on Gloo, and the file refused it)."""
        for wrapper in ("fp16", "bf16"):
            with self.subTest(wrapper=wrapper):
                self.assert_checks(dict(RUN, **{"hook.wrapper": wrapper}), "powersgd", "use_powersgd.py")


class ExportedFilesAreCommtuneBitForBit(unittest.TestCase):
    """The exported use_hook.py in PyTorch's DDP gives commtune's losses bit for bit, bf16 on
    Gloo included (its hooks under names DDP registers without NCCL)."""

    def check(self, overrides):
        with tempfile.TemporaryDirectory() as d:
            init = os.path.join(d, "init.pt")
            run = ct.run_commtune(d, dict({"steps": 8, "weights.save_initial": init, "model.hidden": 64,
                                           "data.features": 32}, **overrides))
            proc = subprocess.run([ct.CLI, "export", "production", "--from", os.path.join(d, "summary.json"),
                                   "--out", os.path.join(d, "export")], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            theirs = replay(d, None, init, ["--exported", os.path.join(d, "export", "use_hook.py")])
            self.assertEqual(theirs["losses"], run.losses())

    def test_bf16_compress_hook(self):
        self.check({"hook.name": "bf16_compress"})

    def test_allreduce_in_the_bf16_wrapper(self):
        self.check({"hook.name": "allreduce", "hook.wrapper": "bf16"})


class CheckpointsLoadByName(unittest.TestCase):
    """A checkpoint is keyed by parameter name: model.load_state_dict takes its "model"; the
    exported loader refuses, in one line naming the parameter, a model renamed or reshaped."""

    def test_plain_load_state_dict_and_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, dict(RUN, **{"steps": 4, "checkpoint.dir": d}), extra_args=["--no-store"])
            folder = os.path.join(d, "step-000004")
            files = export("--from", folder, "--out", os.path.join(d, "export"))  # a folder: runtime state implied
            self.assertEqual(sorted(os.path.basename(f) for f in files if f.endswith(".pt")),
                             ["powersgd_state-rank0.pt", "powersgd_state-rank1.pt"])
            code = f"""
import importlib.util, torch, torch.nn as nn
spec = importlib.util.spec_from_file_location("use_powersgd", {os.path.join(d, "export", "use_powersgd.py")!r})
exported = importlib.util.module_from_spec(spec); spec.loader.exec_module(exported)
sys_path = {os.path.join(HERE)!r}
import sys; sys.path.insert(0, sys_path)
import commtune_reference as ref
ck = torch.load({os.path.join(folder, "rank-0.pt")!r}, weights_only=True)
model = ref.MLP(32, 64, 2, 10)
model.load_state_dict(ck["model"])  # plain PyTorch, by name
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
print("step", exported.load_checkpoint(model, opt, {os.path.join(folder, "rank-0.pt")!r}))
print("momentum", all(torch.equal(opt.state[p]["momentum_buffer"], ck["optimizer_state"][n]["momentum_buffer"])
                      for n, p in model.named_parameters()))
d = torch.load({os.path.join(d, "export", "powersgd_state-rank0.pt")!r}, weights_only=True)
for label, other in (("renamed", nn.ModuleDict(dict(hidden=model.hidden, head=model.output))),
                     ("reshaped", ref.MLP(32, 48, 2, 10))):
    for what, call in (("load_checkpoint", lambda: exported.load_checkpoint(other, opt, {os.path.join(folder, "rank-0.pt")!r})),
                       ("check_model", lambda: exported.check_model(other, d["runtime"]["parameter_shapes"]))):
        try:
            call()
            print(label, what, "ACCEPTED")
        except ValueError as e:
            print(label, what, "refused:", e)
"""
            proc = subprocess.run([ct.ORACLE_PYTHON, "-c", code], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            lines = proc.stdout.splitlines()
            self.assertEqual(lines[:2], ["step 4", "momentum True"])
            refusals = lines[2:]
            self.assertEqual(len(refusals), 4, proc.stdout)
            for line in refusals:
                self.assertIn("refused:", line)
            self.assertIn("'output.weight'", refusals[0])  # renamed: the run's name the model lacks
            self.assertIn("'hidden.0.weight' has shape [48, 32] in the model, [64, 32] in the run", refusals[2])


if __name__ == "__main__":
    unittest.main()

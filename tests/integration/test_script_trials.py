"""The users' Python package (python/commtune): a DDP script's two lines, under a real torchrun of the
reference PyTorch on Gloo. Outside a trial they change nothing; inside one the hook is PyTorch's own,
registered as the trial's configuration says, so the losses equal the same script registering it by
hand, bit for bit; the ranks' event files are the worker's format, which `commtune-cli summarize` and
`import` read; a setting the hook does not take, and a non-finite loss, end the trial saying so."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

SCRIPT = os.path.join(ct.REPO, "tests", "script_trials", "train_ddp.py")
PACKAGE = os.path.join(ct.REPO, "python")


def torchrun(folder, *script_args, trial=None, trial_text=None, expect_ok=True, python_path=()):
    """Runs the script on 2 ranks; returns (each rank's losses, the exit status, the output). trial: the
    configuration (trial_text: its file's text as given); python_path: folders searched before the package."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*python_path, PACKAGE]), OMP_NUM_THREADS="1")
    env.pop("COMMTUNE_TRIAL_CONFIG", None)
    if trial is not None or trial_text is not None:
        path = os.path.join(folder, "trial.json")
        with open(path, "w") as f:
            f.write(json.dumps(trial) if trial_text is None else trial_text)
        env.update(COMMTUNE_TRIAL_CONFIG=path, COMMTUNE_EVENT_FILE=os.path.join(folder, "events-{rank}.ctev"))
    proc = subprocess.run([ct.ORACLE_PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           SCRIPT, *script_args], env=env, cwd=folder, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    losses = ct.printed_losses(proc.stdout)
    if expect_ok and proc.returncode != 0 and not ct.only_pytorchs_teardown_failed(out, losses, 2):
        raise AssertionError(out[-4000:])
    return losses, proc.returncode, out


class ScriptTrials(unittest.TestCase):
    def test_outside_a_trial_the_two_lines_change_nothing(self):
        with tempfile.TemporaryDirectory() as folder:
            attached, _, _ = torchrun(folder)
            plain, _, _ = torchrun(folder, "--plain")
            self.assertEqual(attached, plain)
            self.assertEqual(len(attached[0]), 12)
            self.assertEqual(os.listdir(folder), [])  # nothing written outside a trial

    def test_a_trial_registers_pytorchs_hook_and_its_events_are_the_workers_format(self):
        for hook, direct in ((dict(name="powersgd", matrix_approximation_rank=2, start_powerSGD_iter=2), "powersgd"),
                             (dict(name="fp16_compress"), "fp16_compress"),
                             (dict(name="post_local_sgd", start_localSGD_iter=4, period=3), "post_local_sgd")):
            with self.subTest(hook=hook["name"]), tempfile.TemporaryDirectory() as folder:
                trial, _, _ = torchrun(folder, trial={"hook": hook})
                by_hand, _, _ = torchrun(folder, "--direct", direct)
                self.assertEqual(trial, by_hand)  # bit for bit: PyTorch's hook with the trial's settings
                events = [os.path.join(folder, f"events-{r}.ctev") for r in (0, 1)]
                metrics = os.path.join(folder, "steps.jsonl")
                summary = json.loads(ct.cli("summarize", *events, "--metrics", metrics).stdout)
                self.assertEqual(summary["launcher"]["status"], "succeeded")
                self.assertEqual(summary["config"]["hook"], hook)
                with open(metrics) as f:
                    rows = [json.loads(line) for line in f]
                self.assertEqual(sorted((r["rank"], r["step"], r["loss"]) for r in rows),
                                 sorted((rank, step, loss) for rank, losses in trial.items()
                                        for step, loss in enumerate(losses)))
                for r in rows:
                    self.assertGreater(r["wire_bytes"], 0)
                    phases = sum(r[f"time_{k}_s"] for k in ("data", "forward", "backward", "comm_wait", "optimizer"))
                    self.assertAlmostEqual(phases, r["time_step_s"], delta=1e-9)
                # Once compressing, a step sends less than a float32 allreduce: PowerSGD rank 2 of
                # 64x64 and 64x32 layers, fp16 half of it.
                late = [r for r in rows if r["step"] >= 3]
                if hook["name"] != "post_local_sgd":  # which averages parameters: bytes of its own
                    ratio = late[0]["uncompressed_bytes"] / late[0]["wire_bytes"]
                    self.assertGreater(ratio, 4.0 if hook["name"] == "powersgd" else 1.9)
                # The store takes the job as it takes a worker's.
                store = os.path.join(folder, "runs.db")
                ct.cli("import", *events, "--db", store, "--name", "script")
                listed = ct.cli_json("list", "--db", store)
                self.assertEqual([(r["name"], r["status"], r["world_size"]) for r in listed],
                                 [("script", "succeeded", 2)])

    def test_the_package_installs_with_pip_and_is_a_no_op_outside_a_trial(self):
        import shutil
        with tempfile.TemporaryDirectory() as folder:
            source = shutil.copytree(PACKAGE, os.path.join(folder, "source"))  # pip builds in the tree it is given
            target = os.path.join(folder, "site")
            subprocess.run([ct.ORACLE_PYTHON, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
                            "--no-index", "--target", target, source], check=True, capture_output=True, timeout=300)
            env = dict(os.environ, PYTHONPATH=target)
            env.pop("COMMTUNE_TRIAL_CONFIG", None)
            probe = ("import commtune, torch; m = torch.nn.Linear(2, 2); "
                     "print(commtune.__file__, commtune.attach(m) is m, commtune.log(1.0), commtune.in_trial())")
            out = subprocess.run([ct.ORACLE_PYTHON, "-c", probe],
                                 env=env, capture_output=True, text=True, check=True).stdout.split()
            self.assertEqual(out[0], os.path.join(target, "commtune", "__init__.py"))
            self.assertEqual(out[1:], ["True", "None", "False"])

    def test_a_byteps_trial_is_the_exported_byteps_hook(self):
        """commtune's BytePS hook, as `export production` writes it for a job, registered from the trial's
        settings: the configuration as the tuner hands it over (every default filled in)."""
        with tempfile.TemporaryDirectory() as folder:
            hook = dict(name="byteps", byteps_compressor_type="topk", byteps_compressor_k=0.1,
                        byteps_ef_type="vanilla", byteps_min_compress_bytes=0)
            summary = os.path.join(folder, "run.json")
            with open(summary, "w") as f:
                json.dump({"config": {"hook": hook, "optimizer": {"momentum": 0.9}}}, f)
            ct.cli("export", "production", "--from", summary, "--out", os.path.join(folder, "export"))
            with open(os.path.join(folder, "export", "commtune_config.json")) as f:
                config = json.load(f)
            trial, _, _ = torchrun(folder, trial=config)
            exported, _, _ = torchrun(folder, "--exported", os.path.join(folder, "export", "use_byteps.py"))
            self.assertEqual(trial, exported)
            plain, _, _ = torchrun(folder, "--plain")
            self.assertNotEqual(trial, plain)  # topk at 10% is not an allreduce

    def test_a_setting_the_hook_does_not_take_is_refused_naming_it(self):
        with tempfile.TemporaryDirectory() as folder:
            _, code, out = torchrun(folder, trial={"hook": {"name": "fp16_compress", "matrix_approximation_rank": 2}},
                                    expect_ok=False)
            self.assertNotEqual(code, 0)
            self.assertIn("hook.matrix_approximation_rank: fp16_compress does not take this setting", out)
            summary = ct.cli("summarize", *[os.path.join(folder, f"events-{r}.ctev") for r in (0, 1)], check=False)
            self.assertIn("does not take this setting", summary.stdout + summary.stderr)

    def test_powersgd_in_a_python_without_numpy_is_refused_naming_it(self):
        # PyTorch's PowerSGDState imports numpy, which torch does not require: a numpy that cannot be
        # imported, ahead of the real one on the path, stands for a Python without it.
        with tempfile.TemporaryDirectory() as folder:
            os.makedirs(os.path.join(folder, "without", "numpy"))
            with open(os.path.join(folder, "without", "numpy", "__init__.py"), "w") as f:
                f.write('raise ModuleNotFoundError("No module named \'numpy\'", name="numpy")\n')
            _, code, out = torchrun(folder, trial={"hook": {"name": "powersgd"}}, expect_ok=False,
                                    python_path=[os.path.join(folder, "without")])
            self.assertNotEqual(code, 0)
            self.assertIn("hook.name: powersgd builds PyTorch's PowerSGDState, which imports numpy: the script's "
                          "Python lacks it (pip install numpy)", out)

    def test_a_configuration_that_is_not_json_is_refused_naming_the_file(self):
        for text, said in (("", "is not JSON"),
                           ('{"hook": {"name": "powersgd", "min_compression_rate": NaN}}', "holds NaN, which is not JSON"),
                           ('{"hook": {"name": "allreduce"}, "hook": {}}', "repeats a key"),
                           ("[1, 2]", "not a JSON object"),
                           ('{"hook": {"name": "powersgd"', "is not JSON")):
            with self.subTest(text=text), tempfile.TemporaryDirectory() as folder:
                _, code, out = torchrun(folder, trial_text=text, expect_ok=False)
                self.assertNotEqual(code, 0)
                self.assertIn(f"COMMTUNE_TRIAL_CONFIG: {os.path.join(folder, 'trial.json')}", out)
                self.assertIn(said, out)

    def test_a_non_finite_loss_ends_the_trial_as_diverged(self):
        with tempfile.TemporaryDirectory() as folder:
            _, code, out = torchrun(folder, "--lr", "1e30", trial={"hook": {"name": "allreduce"}}, expect_ok=False)
            self.assertNotEqual(code, 0)
            self.assertIn("Diverged", out)
            summary = ct.cli("summarize", *[os.path.join(folder, f"events-{r}.ctev") for r in (0, 1)], check=False)
            self.assertEqual(json.loads(summary.stdout)["launcher"]["status"], "diverged", summary.stderr)


    def test_the_gpu_checks_script_trials_run_on_the_cpu_as_they_would_on_a_gpu(self):
        # scripts/gpu-check.sh runs tests/gpu/compare_script_trials.py only where a GPU is lent: rehearsed here
        # on the CPU (the same trials and hooks by hand, over Gloo), so that it still runs when one is.
        proc = subprocess.run([ct.ORACLE_PYTHON, os.path.join(ct.REPO, "tests", "gpu", "compare_script_trials.py"),
                               "--build", ct.BUILD, "--device", "cpu"], capture_output=True, text=True, timeout=900)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr[-3000:])
        self.assertEqual(proc.stdout.count(": bit-identical"), 4, proc.stdout)


if __name__ == "__main__":
    unittest.main()

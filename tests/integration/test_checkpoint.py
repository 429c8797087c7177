"""A run resumed from a checkpoint continues exactly where it stopped: the
same losses, step for step, and the same final parameters as the run that
was never interrupted."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402


class Resume(unittest.TestCase):
    def check(self, overrides, resume_at, steps, every):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            folder = os.path.join(a, "checkpoints")
            full = ct.run_commtune(a, dict(overrides, **{"steps": steps, "checkpoint.dir": folder,
                                                         "checkpoint.every": every}))
            self.assertIn({"step": resume_at, "folder": os.path.join(folder, f"step-{resume_at:06d}")},
                          full.summary["checkpoints"])
            resumed = ct.run_commtune(b, dict(overrides, **{
                "steps": steps, "checkpoint.resume": os.path.join(folder, f"step-{resume_at:06d}")}))
            self.assertEqual(resumed.summary["resumed_from_step"], resume_at)
            self.assertEqual(resumed.summary["steps"]["completed"], steps)
            full_losses = full.losses()
            for rank, losses in enumerate(resumed.losses()):
                self.assertEqual(losses, full_losses[rank][resume_at:], f"rank {rank}")
            self.assertEqual(resumed.summary["param_digest"], full.summary["param_digest"])

    def test_powersgd_with_error_feedback_and_adam(self):
        self.check({"hook.name": "powersgd", "hook.matrix_approximation_rank": 2, "hook.start_powerSGD_iter": 3,
                    "optimizer.name": "adam", "optimizer.lr": 0.002, "model.hidden": 128}, resume_at=12, steps=20,
                   every=6)

    def test_before_the_bucket_rebuild_across_shuffled_epochs(self):
        # 3 ranks, 300 samples, batch 16: an epoch is 7 steps.
        common = {"world_size": 3, "data.samples": 300, "data.batch_size": 16, "optimizer.warmup_steps": 5,
                  "ddp.bucket_cap_mb": 0.5, "model.hidden": 256}
        self.check(common, resume_at=1, steps=18, every=1)
        self.check(common, resume_at=9, steps=18, every=9)

    def test_batched_powersgd_under_the_fp16_wrapper(self):
        self.check({"hook.name": "batched_powersgd", "hook.wrapper": "fp16", "hook.start_powerSGD_iter": 2,
                    "model.hidden": 64}, resume_at=5, steps=12, every=5)

    def test_a_checkpoint_that_does_not_fit_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            folder = os.path.join(d, "checkpoints")
            ct.run_commtune(d, {"steps": 4, "checkpoint.dir": folder, "model.hidden": 64})
            step4 = os.path.join(folder, "step-000004")
            cases = [({"world_size": 4}, "written by 2 ranks"),
                     ({"model.hidden": 32}, "parameter 'hidden.0.weight' has shape [64, "),
                     ({"checkpoint.resume": os.path.join(folder, "step-000099")}, "does not exist"),
                     ({"steps": 3}, "set steps to at least 4")]  # nothing left to run: not "4/3 steps"
            for overrides, message in cases:
                run = ct.run_commtune(d, dict({"steps": 6, "model.hidden": 64, "checkpoint.resume": step4}, **overrides),
                                      check=False)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertIn("checkpoint.resume", run.stderr)
                self.assertIn(message, run.stderr)


class PlainFiles(unittest.TestCase):
    """A checkpoint file is a plain dict keyed by parameter name, whatever the hook and
    optimizer: torch.load(weights_only=True) reads it, "model" is a state_dict the model in
    PyTorch takes, "optimizer_state" holds what torch.optim keeps per parameter."""

    def test_every_hook_and_optimizer_writes_a_plain_dict_by_name(self):
        cases = [{"hook.name": "powersgd", "hook.start_powerSGD_iter": 2},
                 {"hook.name": "byteps", "hook.byteps_ef_type": "vanilla", "hook.byteps_momentum_type": "nesterov",
                  "hook.byteps_min_compress_bytes": 0, "optimizer.momentum": 0},
                 {"hook.name": "slowmo"}, {"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 2},
                 {"hook.name": "allreduce", "optimizer.name": "adam", "optimizer.lr": 0.001}]
        for overrides in cases:
            with self.subTest(**overrides), tempfile.TemporaryDirectory() as d:
                ct.run_commtune(d, dict({"steps": 4, "model.hidden": 64, "data.features": 32, "checkpoint.dir": d},
                                                 **overrides),
                                extra_args=["--no-store"])
                code = (f"import sys, torch; sys.path.insert(0, {os.path.join(ct.REPO, 'tests', 'oracle')!r})\n"
                        "import commtune_reference as ref\n"
                        f"ck = torch.load({os.path.join(d, 'step-000004', 'rank-1.pt')!r}, weights_only=True)\n"
                        "model = ref.MLP(32, 64, 2, 10)\n"
                        "model.load_state_dict(ck['model'])\n"
                        "print(ck['version'], ck['step'], list(ck['model']) == [n for n, _ in model.named_parameters()],"
                        " sorted(ck['optimizer_state']['output.weight']))\n")
                proc = subprocess.run([ct.ORACLE_PYTHON, "-c", code], capture_output=True, text=True)
                self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
                moments = "['exp_avg', 'exp_avg_sq']" if "optimizer.name" in overrides else \
                    ("[]" if overrides.get("optimizer.momentum") == 0 else "['momentum_buffer']")
                self.assertEqual(proc.stdout.strip(), f"2 4 True {moments}")


if __name__ == "__main__":
    unittest.main()

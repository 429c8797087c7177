"""PowerSGD against PyTorch 2.11's powerSGD_hook (the project's .venv, real
DDP on Gloo; inside fp16/bf16 wrappers too), and, where PyTorch cannot run
the case on CPU (the batched variant, several buckets on Gloo), against the
independent float64 implementation in powersgd_reference.py.

Stated tolerances. Against PyTorch: none; every loss and every reduced
gradient is bit-identical at every step (same libtorch, MKL and threads on
both sides, MKL in its reproducible mode, as docs/exactness.md says). Against
the float64 reference, every step starts from commtune's state before it,
and the step's reduced gradients, every rank's new error and the new Q must
match within 1e-5 (float32 buckets) or 1e-3 (half-precision buckets) in
relative Frobenius norm; with half-precision buckets at most a quarter of
the steps may differ at all (a rounding that falls the other way), where a
wrong precision model differs on every step.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import commtune_testing as ct  # noqa: E402
from powersgd_reference import PowerSGDReference  # noqa: E402

import torch  # noqa: E402

REFERENCE = os.path.join(HERE, "commtune_reference.py")
SMALL_MLP = {"model.hidden": 64, "data.features": 32}
ONE_BUCKET = {"ddp.bucket_cap_mb": 100}  # PyTorch's hook needs one on Gloo (2.11 aborts with several)


def powersgd(**options):
    return {"hook." + k: v for k, v in dict({"name": "powersgd"}, **options).items()}


class PowerSgdAgainstPyTorch(unittest.TestCase):
    def check(self, overrides, world, steps=25):
        with tempfile.TemporaryDirectory() as d:
            mine_dir, ref_dir = os.path.join(d, "mine"), os.path.join(d, "ref")
            os.makedirs(ref_dir)
            init = os.path.join(d, "init.pt")
            run = ct.run_commtune(d, dict({"world_size": world, "steps": steps, "weights.save_initial": init,
                                           "debug.dump_grads_steps": steps, "debug.dump_dir": mine_dir},
                                          **ONE_BUCKET, **overrides))
            proc = subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(d, "summary.json"),
                                   "--init", init, "--out", os.path.join(d, "ref.json"), "--dump-grads", ref_dir],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            reference = json.load(open(os.path.join(d, "ref.json")))["losses"]
            for rank, (mine, theirs) in enumerate(zip(run.losses(), reference)):
                for step, (a, b) in enumerate(zip(mine, theirs)):
                    self.assertEqual(a, b, f"rank {rank} step {step}: {a} vs PyTorch {b}")
            ours = ct.load_gradient_dumps(mine_dir, world, steps)
            theirs = ct.load_gradient_dumps(ref_dir, world, steps)
            for step in range(steps):
                for rank in range(world):
                    for key, expected in theirs[step][rank].items():
                        self.assertTrue(torch.equal(ours[step][rank][key], expected), f"step {step} rank {rank} {key}")
            stats = run.summary["hook_stats"]
            self.assertGreater(stats["compression_rate"], 1.5)  # it compressed
            return run

    def test_mlp_rank1_defaults_two_ranks(self):
        self.check(dict(SMALL_MLP, **powersgd(start_powerSGD_iter=3)), world=2)

    def test_mlp_rank4_qr_four_ranks(self):
        self.check(dict(SMALL_MLP, **powersgd(matrix_approximation_rank=4, start_powerSGD_iter=3)), world=4)

    def test_mlp_one_rank(self):
        self.check(dict(SMALL_MLP, **powersgd(matrix_approximation_rank=2, start_powerSGD_iter=2)), world=1)

    def test_mlp_error_feedback_off_warm_start_on_batched_shapes(self):
        self.check(dict(SMALL_MLP, **{"model.layers": 3}, **powersgd(
            matrix_approximation_rank=2, start_powerSGD_iter=2, use_error_feedback=False,
            batch_tensors_with_same_shape=True, orthogonalization_epsilon=1e-8)), world=2)

    def test_cnn_rank3_without_error_feedback_or_warm_start(self):
        self.check(dict({"model.name": "cnn", "data.name": "synthetic_images"}, **powersgd(
            matrix_approximation_rank=3, start_powerSGD_iter=0, use_error_feedback=False, warm_start=False)),
            world=2, steps=22)

    def test_fp16_wrapper(self):
        self.check(dict(SMALL_MLP, **powersgd(wrapper="fp16", matrix_approximation_rank=2, start_powerSGD_iter=3)),
                   world=2)

    def test_bf16_wrapper_rank4(self):
        self.check(dict(SMALL_MLP, **powersgd(wrapper="bf16", matrix_approximation_rank=4, start_powerSGD_iter=2)),
                   world=2)

    def test_cnn_rank1_error_feedback_without_warm_start_four_ranks(self):
        self.check(dict({"model.name": "cnn", "data.name": "synthetic_images"}, **powersgd(
            start_powerSGD_iter=2, warm_start=False)), world=4, steps=22)


class PowerSgdAgainstFloat64Reference(unittest.TestCase):
    def check(self, overrides, world, variant, storage, steps=22):
        """Every step from commtune's own state before it: the step's result, the
        new errors of every rank and the new warm-start Q must match."""
        with tempfile.TemporaryDirectory() as d:
            dumps = os.path.join(d, "grads")
            run = ct.run_commtune(d, dict({"world_size": world, "steps": steps, "debug.dump_grads_steps": steps,
                                           "debug.dump_dir": dumps}, **overrides))
            grads = ct.load_gradient_dumps(dumps, world, steps)
            shapes = {k[len("reduced/"):]: v.shape for k, v in grads[0][0].items() if k.startswith("reduced/")}
            buckets = [[(name, shapes[name]) for name in b["parameters"]] for b in run.summary["buckets"]]
            reference = PowerSGDReference(run.summary["config"]["hook"], world, buckets, variant, storage)
            half = storage != torch.float32
            tolerance = 1e-3 if half else 1e-5
            inexact_steps = 0
            for step in range(steps):
                if step > 0:
                    before = [grads[step - 1][r]["hook"] for r in range(world)]
                    reference.start_from({(r, b): e for r in range(world) for b, e in before[r]["error_dict"].items()},
                                         before[0]["q_memory_dict"])
                expected = reference.step([{n: grads[step][r]["local/" + n].double() for n in shapes}
                                           for r in range(world)])
                after = [grads[step][r]["hook"] for r in range(world)]
                errors = [ct.frobenius_error(grads[step][0]["reduced/" + n], expected[n]) for n in shapes]
                errors += [ct.frobenius_error(e, reference.errors[(r, b)])
                           for r in range(world) for b, e in after[r]["error_dict"].items()]
                errors += [ct.frobenius_error(q, reference.q[b]) for b, q in after[0]["q_memory_dict"].items()]
                self.assertLessEqual(max(errors), tolerance, f"step {step}")
                inexact_steps += max(errors) > 0
                for n in shapes:
                    for r in range(1, world):
                        self.assertTrue(torch.equal(grads[step][0]["reduced/" + n], grads[step][r]["reduced/" + n]))
            if half:  # most steps round exactly alike; a half-precision model that is wrong differs on every one
                self.assertLessEqual(inexact_steps, steps // 4)
            self.assertGreater(run.summary["hook_stats"]["compression_rate"], 1.5)
            return run

    def test_batched_two_ranks(self):
        self.check(dict(SMALL_MLP, **powersgd(name="batched_powersgd", matrix_approximation_rank=2,
                                               start_powerSGD_iter=3)), 2, "batched_powersgd", torch.float32)

    def test_batched_four_ranks_several_buckets(self):
        run = self.check(dict(SMALL_MLP, **{"ddp.bucket_cap_mb": 0.01, "ddp.first_bucket_cap_mb": 0.002},
                              **powersgd(name="batched_powersgd", matrix_approximation_rank=3,
                                         start_powerSGD_iter=2)), 4, "batched_powersgd", torch.float32)
        self.assertGreater(len(run.summary["buckets"]), 2)

    def test_several_buckets_on_gloo(self):
        run = self.check(dict(SMALL_MLP, **{"model.layers": 3, "ddp.bucket_cap_mb": 0.01,
                                            "ddp.first_bucket_cap_mb": 0.002},
                              **powersgd(matrix_approximation_rank=2, start_powerSGD_iter=3)),
                         4, "powersgd", torch.float32)
        self.assertGreater(len(run.summary["buckets"]), 2)

    def test_several_buckets_rank4_qr_no_warm_start(self):
        self.check(dict(SMALL_MLP, **{"model.layers": 3, "ddp.bucket_cap_mb": 0.01, "ddp.first_bucket_cap_mb": 0.002},
                        **powersgd(matrix_approximation_rank=4, start_powerSGD_iter=2, warm_start=False)),
                   2, "powersgd", torch.float32)

    def test_fp16_wrapper(self):
        self.check(dict(SMALL_MLP, **powersgd(wrapper="fp16", matrix_approximation_rank=2, start_powerSGD_iter=3)),
                   2, "powersgd", torch.float16)

    def test_bf16_wrapper_rank4_orthogonalises_with_gram_schmidt(self):
        # Half storage orthogonalises with Gram-Schmidt even at rank 4, as PyTorch does.
        self.check(dict(SMALL_MLP, **powersgd(wrapper="bf16", matrix_approximation_rank=4, start_powerSGD_iter=2)),
                   2, "powersgd", torch.bfloat16)

    def test_fp16_wrapper_batched(self):
        self.check(dict(SMALL_MLP, **powersgd(name="batched_powersgd", wrapper="fp16", start_powerSGD_iter=2)),
                   2, "batched_powersgd", torch.float16)


class PowerSgdConfiguration(unittest.TestCase):
    def test_start_iteration_must_follow_the_bucket_rebuild(self):
        with tempfile.TemporaryDirectory() as d:
            run = ct.run_commtune(d, powersgd(start_powerSGD_iter=1), check=False)
            self.assertEqual(run.returncode, 2)
            self.assertIn("hook.start_powerSGD_iter", run.stderr)
            self.assertIn("rebuilds its buckets", run.stderr)
        with tempfile.TemporaryDirectory() as d:  # allowed without error feedback and warm start
            ct.run_commtune(d, dict({"steps": 3}, **powersgd(start_powerSGD_iter=0, use_error_feedback=False,
                                                               warm_start=False)))

    def test_compression_statistics_stream(self):
        with tempfile.TemporaryDirectory() as d:
            run = ct.run_commtune(d, dict({"steps": 6}, **SMALL_MLP, **powersgd(start_powerSGD_iter=3)))
            rows = run.metrics
            early = [r for r in rows if r["step"] < 3]
            late = [r for r in rows if r["step"] >= 3]
            self.assertTrue(all(r["stats"]["compression_rate"] == 1.0 for r in early))
            # 32x64 + 64x64 + 64x10 matrices at rank 1, plus biases, against all elements.
            before = 32 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10
            after = (32 + 64) + 64 + (64 + 64) + 64 + (64 + 10) + 10
            for r in late:
                self.assertEqual(r["stats"]["numel_before"], before)
                self.assertEqual(r["stats"]["numel_after"], after)
                self.assertAlmostEqual(r["stats"]["compression_rate"], before / after)
                self.assertGreater(r["stats"]["residual_norm"], 0)
                self.assertTrue(any(b["name"] == "residual_norm" for b in r["bucket_stats"]))
                self.assertLess(r["wire_bytes"], r["uncompressed_bytes"] / 5)


if __name__ == "__main__":
    unittest.main()

"""commtune against real PyTorch 2.11 DDP (the project's .venv, the wheel
whose libtorch commtune links) with its real hooks on Gloo, bf16 ones
included: the same model, initial weights, data, seeds and steps; users'
own TorchScript files and tensor files too.

Stated tolerance: none. Every rank's loss at every step and the final
parameters are bit-identical to PyTorch's, as docs/exactness.md says: both sides
run the same libtorch and MKL with the same threads, MKL in its
reproducible mode (MKL_CBWR=AUTO, which commtune's workers and the
reference set). Any difference in what is communicated, in what order it is
summed, or in what is averaged fails the test.
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402
import user_models  # noqa: E402

import torch  # noqa: E402

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "commtune_reference.py")


def name_in_c10(dtype):
    """A dtype as libtorch's c10::toString names it."""
    return {torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
            torch.complex64: "ComplexFloat"}[dtype]


class DdpOracle(unittest.TestCase):
    def compare(self, overrides, world=2, steps=30):
        if "model.name" not in overrides:  # the MLP a quarter as wide as the default: the same ops, a tenth the work
            overrides = dict({"model.hidden": 256}, **overrides)
        with tempfile.TemporaryDirectory() as d:
            init, final, ref_final = (os.path.join(d, n) for n in ("init.pt", "final.pt", "ref_final.pt"))
            run = ct.run_commtune(d, dict({"world_size": world, "steps": steps, "weights.save_initial": init,
                                           "weights.save_final": final}, **overrides))
            ref_out = os.path.join(d, "ref.json")
            proc = subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(d, "summary.json"),
                                   "--init", init, "--out", ref_out, "--final", ref_final],
                                  capture_output=True, text=True, timeout=240)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            reference = json.load(open(ref_out))["losses"]
            mine = run.losses()
            self.assertEqual(len(mine), world)
            for rank in range(world):
                self.assertEqual(len(mine[rank]), steps)
                for step, (a, b) in enumerate(zip(mine[rank], reference[rank])):
                    self.assertEqual(a, b, f"rank {rank} step {step}: commtune {a!r}, PyTorch {b!r}")
            a, b = torch.load(final), torch.load(ref_final)
            self.assertEqual(sorted(a), sorted(b))
            for name in a:
                self.assertTrue(torch.equal(a[name], b[name]), f"final {name}")
            # The run really trained: losses moved.
            self.assertNotEqual(mine[0][0], mine[0][-1])
            return run

    # --- hooks -----------------------------------------------------------------
    # --- post-local SGD: PyTorch's post_localSGD_hook + PeriodicModelAverager ----------

    def test_post_local_sgd_with_subgroups_four_ranks(self):
        self.compare({"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 5, "hook.subgroup_size": 2,
                      "hook.period": 3, "hook.warmup_steps": 5}, world=4, steps=24)

    def test_post_local_sgd_with_hierarchical_averaging(self):
        run = self.compare({"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 4, "hook.subgroup_size": 2,
                            "hook.hierarchy": "2:2,6:4", "hook.warmup_steps": 4}, world=4, steps=20)
        self.assertTrue(run.summary["ranks_in_sync"] is False)  # step 19: nobody averaged since step 18's groups

    def test_post_local_sgd_without_gradient_averaging(self):
        run = self.compare({"hook.name": "post_local_sgd", "hook.start_localSGD_iter": 4,
                            "hook.post_local_gradient_allreduce": False, "hook.period": 4, "hook.warmup_steps": 0},
                           world=2, steps=22)
        # Between averagings the ranks drift apart; step 21 is one after an averaging (steps 0, 4, ..., 20).
        self.assertTrue(run.summary["ranks_in_sync"] is False)

    def test_allreduce_two_ranks(self):
        self.compare({"hook.name": "allreduce"}, world=2, steps=40)

    def test_allreduce_four_ranks_several_buckets(self):
        # bucket_cap_mb alone: the first bucket has its cap too, as PyTorch 2.x's DDP gives it.
        run = self.compare({"hook.name": "allreduce", "model.layers": 3, "model.hidden": 512,
                            "ddp.bucket_cap_mb": 0.1}, world=4, steps=25)
        self.assertGreaterEqual(len(run.summary["buckets"]), 3)  # one per layer

    def test_builtin_reduction_three_ranks(self):
        # No hook: DDP scales gradients by 1/3 while copying them into the bucket (not a power of two).
        self.compare({"hook.name": "none"}, world=3, steps=25)

    def test_fp16_compress(self):
        self.compare({"hook.name": "fp16_compress"})

    def test_fp16_wrapper_around_allreduce(self):
        # Two ranks: the unwrapped allreduce folds its division into the gradient copy there.
        self.compare({"hook.name": "allreduce", "hook.wrapper": "fp16"}, world=2)

    def test_noop(self):
        run = self.compare({"hook.name": "noop"})
        self.assertFalse(run.summary["ranks_in_sync"])

    def test_bf16_compress(self):
        self.compare({"hook.name": "bf16_compress"})

    def test_bf16_wrapper_four_ranks(self):
        self.compare({"hook.name": "allreduce", "hook.wrapper": "bf16"}, world=4, steps=20)

    # --- optimizers and data order ------------------------------------------------
    def test_adam_with_warmup_and_weight_decay(self):
        self.compare({"optimizer.name": "adam", "optimizer.lr": 0.002, "optimizer.warmup_steps": 8,
                      "optimizer.weight_decay": 0.01})

    def test_sgd_dampening_weight_decay_drop_last_no_shuffle(self):
        self.compare({"optimizer.dampening": 0.1, "optimizer.weight_decay": 1e-4, "data.batch_size": 48,
                      "data.drop_last": True, "data.shuffle": False, "data.samples": 500}, world=3, steps=30)

    def test_nesterov(self):
        self.compare({"optimizer.nesterov": True, "optimizer.lr": 0.02})

    # --- models -------------------------------------------------------------------
    def test_cnn(self):
        self.compare({"model.name": "cnn", "data.name": "synthetic_images"})

    def test_transformer_language_model(self):
        self.compare({"model.name": "transformer_lm", "data.name": "synthetic_tokens", "optimizer.name": "adam",
                      "optimizer.lr": 0.003, "hook.name": "fp16_compress"}, steps=25)

    def test_torchscript_model(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "net.pt")
            script = (
                "import torch\n"
                "class Net(torch.nn.Module):\n"
                "    def __init__(self):\n"
                "        super().__init__()\n"
                "        self.fc1 = torch.nn.Linear(32, 64)\n"
                "        self.fc2 = torch.nn.Linear(64, 5)\n"
                "    def forward(self, x):\n"
                "        return self.fc2(torch.tanh(self.fc1(x)))\n"
                f"torch.jit.script(Net()).save({path!r})\n")
            with open(os.path.join(d, "make_net.py"), "w") as f:  # torch.jit.script reads the source
                f.write(script)
            subprocess.run([ct.ORACLE_PYTHON, os.path.join(d, "make_net.py")], check=True)
            self.compare({"model.name": "torchscript", "model.path": path, "data.features": 32, "data.classes": 5})

    # --- users' own models and data, saved by PyTorch 2.11 ------------------------------
    def user_model(self, module, x, y, kind, **settings):
        """A TorchScript file of `module` and a data file of (x, y), as a user saves them, trained by
        commtune and by PyTorch's DDP from the same file."""
        with tempfile.TemporaryDirectory() as d:
            model = user_models.save_scripted(module, os.path.join(d, "model.pt"))
            data = user_models.write_tensors(kind, os.path.join(d, "data"), x, y)
            return self.compare(dict({"model.name": "torchscript", "model.path": model, "data.name": "tensors",
                                      "data.path": data}, **settings), steps=15)

    def test_decoder_only_transformer_with_sdpa_tanh_gelu_and_tied_embeddings(self):
        x, y = user_models.token_sequences()
        run = self.user_model(user_models.DecoderOnly(), x, y, "safetensors", **{"optimizer.name": "adam",
                                                                                   "optimizer.lr": 0.003})
        names = [name for bucket in run.summary["buckets"] for name in bucket["parameters"]]
        self.assertIn("tok.weight", names)
        self.assertNotIn("head.weight", names)  # tied to the embedding: one parameter, trained once

    def test_resnet_with_batch_norm(self):
        x, y = user_models.labelled((256, 3, 16, 16), 10)
        self.user_model(user_models.ResNet(), x, y, "npy", **{"data.batch_size": 16})

    def test_mlp_from_a_torch_save_file(self):
        x, y = user_models.labelled((256, 32), 5)
        self.user_model(user_models.Mlp(), x, y, "torch")

    def test_buffers_of_every_dtype_travel_bit_for_bit(self):
        """complex64, float64, int64 past 2^24, int32, bool, float16, bfloat16 and uint8 buffers, each
        rank updating them from its own batch: on 2 ranks commtune's losses and weights are PyTorch's."""
        x, y = user_models.labelled((256, 32), 5)
        self.user_model(user_models.BufferZoo(), x, y, "npy")

    def test_parameters_of_a_dtype_it_does_not_train_are_refused_naming_them(self):
        x, y = user_models.labelled((64, 32), 5)
        for dtype in (torch.float64, torch.float16, torch.bfloat16, torch.complex64):
            with self.subTest(dtype=dtype), tempfile.TemporaryDirectory() as d:
                model = user_models.save_scripted(user_models.Dtyped(dtype), os.path.join(d, "model.pt"))
                data = user_models.write_tensors("npy", os.path.join(d, "data"), x, y)
                run = ct.run_commtune(d, {"world_size": 2, "steps": 3, "model.name": "torchscript",
                                          "model.path": model, "data.name": "tensors", "data.path": data},
                                      check=False)
                self.assertNotEqual(run.returncode, 0)
                self.assertIn(f"parameter 'fc1.weight' is {name_in_c10(dtype)}; commtune trains float32 parameters",
                              run.stderr)
                self.assertEqual(run.metrics, [], "no step ran")

    # --- file datasets ----------------------------------------------------------------
    def test_mnist_files(self):
        with tempfile.TemporaryDirectory() as d:
            g = torch.Generator().manual_seed(1)
            n = 300
            images = torch.randint(0, 256, (n, 28, 28), generator=g, dtype=torch.uint8)
            labels = torch.randint(0, 10, (n,), generator=g, dtype=torch.uint8)
            with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz"), "wb") as f:
                f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images.numpy().tobytes())
            with open(os.path.join(d, "train-labels-idx1-ubyte"), "wb") as f:
                f.write(struct.pack(">II", 0x801, n) + labels.numpy().tobytes())
            # The reference reads plain files; give it the decompressed copy.
            with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz")) as f, \
                    open(os.path.join(d, "train-images-idx3-ubyte"), "wb") as out:
                out.write(f.read())
            self.compare({"model.name": "cnn", "data.name": "mnist", "data.path": d, "data.batch_size": 16},
                         steps=20)

    def test_cifar10_files(self):
        with tempfile.TemporaryDirectory() as d:
            g = torch.Generator().manual_seed(2)
            for batch, n in ((1, 100), (2, 60)):
                labels = torch.randint(0, 10, (n, 1), generator=g, dtype=torch.uint8)
                pixels = torch.randint(0, 256, (n, 3072), generator=g, dtype=torch.uint8)
                with open(os.path.join(d, f"data_batch_{batch}.bin"), "wb") as f:
                    f.write(torch.cat([labels, pixels], 1).numpy().tobytes())
            self.compare({"model.name": "cnn", "model.width": 8, "data.name": "cifar10", "data.path": d,
                          "data.batch_size": 16}, steps=15)


class ReplayedInPyTorch(unittest.TestCase):
    """A run replayed by a PyTorch job as a user writes it (tests/oracle/replay_job.py: a DataLoader over a
    DistributedSampler, under torchrun), as docs/exactness.md's "Replaying a run in plain PyTorch" says to."""
    JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replay_job.py")

    def files(self, d, module, x, y):
        """The module's TorchScript file and the data's folder, as a user saves them."""
        return (user_models.save_scripted(module, os.path.join(d, "model.pt")),
                user_models.write_tensors("npy", os.path.join(d, "data"), x, y))

    def commtune(self, d, model, data, steps):
        return ct.run_commtune(d, {"world_size": 2, "steps": steps, "model.name": "torchscript", "model.path": model,
                                   "data.name": "tensors", "data.path": data}).losses()

    def job(self, d, model, data, steps, *job_args):
        out = os.path.join(d, "job.json")
        proc = subprocess.run([ct.ORACLE_PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                               "2", self.JOB, "--model", model, "--data", data, "--steps", str(steps), "--out", out,
                               *job_args], capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, MKL_CBWR="AUTO"))
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return json.load(open(out))

    def test_dropout_replays_bit_for_bit_over_several_epochs_when_the_loader_has_its_own_generator(self):
        x, y = user_models.labelled((256, 32), 5)  # 4 steps an epoch on each of 2 ranks
        with tempfile.TemporaryDirectory() as d:
            model, data = self.files(d, user_models.DropoutMlp(), x, y)
            mine = self.commtune(d, model, data, 14)
            self.assertEqual(mine, self.job(d, model, data, 14, "--own-loader-generator"))
            self.assertNotEqual(mine[0][0], mine[0][-1])
            # Without it, each epoch's iterator draws from the global generator: the masks shift.
            self.assertNotEqual(mine, self.job(d, model, data, 14))

    def test_the_eager_module_trains_within_1e_6_of_its_torchscript_file(self):
        """TorchScript's executor rounds a LLaMA-style block (RMSNorm, rotary, SwiGLU) differently from
        eager PyTorch at some steps, by about one unit in the last place of the float32 loss."""
        x, y = user_models.token_sequences()
        with tempfile.TemporaryDirectory() as d:
            model, data = self.files(d, user_models.Llama(), x, y)
            mine = self.commtune(d, model, data, 15)
            # The same TorchScript file in PyTorch's DDP: bit for bit.
            self.assertEqual(mine, self.job(d, model, data, 15, "--own-loader-generator"))
            eager = self.job(d, model, data, 15, "--own-loader-generator", "--eager", "user_models:Llama")
            worst = max(abs(a - b) / abs(b) for rank in range(2) for a, b in zip(mine[rank], eager[rank]))
            self.assertLess(worst, 1e-6)


if __name__ == "__main__":
    unittest.main()

"""The byteps hook (byteps_aggregation=server, the default) against an
independent reference written from BytePS's source (byteps_reference.py,
which names the file each rule comes from), and its export: the PyTorch DDP
hook (use_byteps.py) gives commtune's losses bit for bit in PyTorch 2.11 on
Gloo, from the start and continued from a commtune checkpoint, and runs as
its docstring says; the MXNet file has BytePS's keys.

Tolerance: none. At every step, every rank's reduced gradient of every
parameter equals the reference's bit for bit (compared with torch.equal,
which counts -0 and +0 as equal: the server adds a decoded zero where BytePS
adds a dense zero vector). The reference carries its own memories (worker
and server error feedback, momentum, the NAG of small tensors, randomk's
generators) from step to step; it takes only the ranks' local gradients from
commtune's dumps.

The runs: the small MLP, with a compression threshold and partition size
small enough that its weights are compressed in several partitions while
its biases go uncompressed, several DDP buckets (so the memories must follow
parameters through the rebuild after step 0), and a learning-rate warm-up
(so error feedback's lr ratio is not 1)."""
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
from byteps_reference import BytePS  # noqa: E402

import torch  # noqa: E402

STEPS = 12
SETUP = {"model.hidden": 64, "data.features": 32, "optimizer.momentum": 0, "optimizer.lr": 0.1,
         "optimizer.warmup_steps": 5, "ddp.first_bucket_cap_mb": 0.01, "ddp.bucket_cap_mb": 0.01,
         "hook.name": "byteps", "hook.byteps_min_compress_bytes": 4096, "hook.byteps_partition_bytes": 4096}
DEFAULTS = {"byteps_compressor_k": 0.01, "byteps_compressor_onebit_scaling": True, "byteps_ef_type": "none",
            "byteps_momentum_type": "none", "byteps_momentum_mu": 0.9, "byteps_seed": 0}


def lr_at(step):
    return SETUP["optimizer.lr"] * min(1.0, (step + 1) / SETUP["optimizer.warmup_steps"])


class BytepsAgainstReference(unittest.TestCase):
    def check(self, world, **hook):
        options = dict(DEFAULTS, **hook)
        for key in ("byteps_min_compress_bytes", "byteps_partition_bytes"):
            options[key] = SETUP["hook." + key]
        with tempfile.TemporaryDirectory() as d:
            dumps = os.path.join(d, "grads")
            run = ct.run_commtune(d, dict(SETUP, **{"world_size": world, "steps": STEPS,
                                                    "debug.dump_grads_steps": STEPS, "debug.dump_dir": dumps},
                                          **{"hook." + k: v for k, v in hook.items()}))
            self.assertGreater(len(run.summary["buckets"]), 1, "the runs are meant to have several buckets")
            grads = ct.load_gradient_dumps(dumps, world, STEPS)
            reference = BytePS(options, world)
            names = [k[len("local/"):] for k in grads[0][0] if k.startswith("local/")]
            for step in range(STEPS):
                for name in names:
                    local = [grads[step][r]["local/" + name].reshape(-1).numpy() for r in range(world)]
                    expected = torch.from_numpy(reference.push_pull(name, local, lr_at(step)))
                    for r in range(world):
                        mine = grads[step][r]["reduced/" + name].reshape(-1)
                        self.assertTrue(torch.equal(mine, expected),
                                        f"step {step} rank {r} {name}: max difference "
                                        f"{(mine - expected).abs().max().item():.3g}")
            # It compressed: rank 0's last push is well under the gradients' bytes.
            last = [r for r in run.metrics if r["rank"] == 0][-1]
            pushed = sum(s["value"] for s in last["bucket_stats"] if s["name"] == "payload_bytes")
            self.assertLess(pushed, 4 * sum(b["numel"] for b in run.summary["buckets"]) / 1.5)

    def test_onebit_scaled_with_error_feedback_and_momentum_two_ranks(self):
        self.check(2, byteps_compressor_type="onebit", byteps_ef_type="vanilla", byteps_momentum_type="nesterov")

    def test_onebit_unscaled_four_ranks(self):
        self.check(4, byteps_compressor_type="onebit", byteps_compressor_onebit_scaling=False)

    def test_onebit_scaled_with_error_feedback_four_ranks(self):
        self.check(4, byteps_compressor_type="onebit", byteps_ef_type="vanilla")

    def test_topk_with_error_feedback_and_momentum_two_ranks(self):
        self.check(2, byteps_compressor_type="topk", byteps_compressor_k=0.05, byteps_ef_type="vanilla",
                   byteps_momentum_type="nesterov")

    def test_topk_four_ranks(self):
        self.check(4, byteps_compressor_type="topk", byteps_compressor_k=20)

    def test_randomk_seeded_with_error_feedback_and_momentum_two_ranks(self):
        self.check(2, byteps_compressor_type="randomk", byteps_compressor_k=0.1, byteps_seed=7,
                   byteps_ef_type="vanilla", byteps_momentum_type="nesterov", byteps_momentum_mu=0.5)

    def test_randomk_seeded_four_ranks(self):
        self.check(4, byteps_compressor_type="randomk", byteps_compressor_k=0.2, byteps_seed=12345)


REFERENCE = os.path.join(HERE, "commtune_reference.py")
EXPORT_RUN = dict(SETUP, **{"ddp.first_bucket_cap_mb": 100, "ddp.bucket_cap_mb": 100, "steps": 10,
                            "hook.byteps_ef_type": "vanilla"})


def replay(workdir, init, *extra):
    """commtune_reference.py (PyTorch's DDP) over the run in workdir/summary.json; returns its losses."""
    out = os.path.join(workdir, "reference.json")
    proc = subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(workdir, "summary.json"), "--init",
                           init, "--out", out, *extra], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(proc.stderr[-3000:])
    return json.load(open(out))["losses"]


class ExportedTorchHook(unittest.TestCase):
    def export(self, workdir, source):
        out = os.path.join(workdir, "export")
        proc = subprocess.run([ct.CLI, "export", "production", "--from", source, "--out", out],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return out

    def check(self, world, **hook):
        """The exported hook in PyTorch's DDP from the run's initial weights, and from the run's
        checkpoint at step 4 (weights, optimizer and hook memories through the file's loaders):
        every rank's loss at every step is commtune's."""
        with tempfile.TemporaryDirectory() as d:
            init = os.path.join(d, "init.pt")
            run = ct.run_commtune(d, dict(EXPORT_RUN, **{"world_size": world, "weights.save_initial": init,
                                                         "checkpoint.dir": os.path.join(d, "ck"),
                                                         "checkpoint.every": 4},
                                          **{"hook." + k: v for k, v in hook.items()}))
            hook_file = os.path.join(self.export(d, os.path.join(d, "summary.json")), "use_byteps.py")
            self.assertEqual(replay(d, init, "--exported", hook_file), run.losses())
            continued = replay(d, init, "--exported", hook_file, "--resume", os.path.join(d, "ck", "step-000004"))
            self.assertEqual(continued, [losses[4:] for losses in run.losses()])

    def test_onebit_with_error_feedback_and_momentum(self):
        self.check(2, byteps_compressor_type="onebit", byteps_momentum_type="nesterov")

    def test_topk_with_error_feedback_four_ranks(self):
        self.check(4, byteps_compressor_type="topk", byteps_compressor_k=0.05)

    def test_randomk_unseeded_with_error_feedback_and_momentum(self):
        self.check(2, byteps_compressor_type="randomk", byteps_compressor_k=0.1, byteps_momentum_type="nesterov")

    def test_the_check_in_its_docstring_runs(self):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, dict(EXPORT_RUN, **{"hook.byteps_compressor_type": "topk", "steps": 2}))
            out = self.export(d, os.path.join(d, "summary.json"))
            self.assertEqual(sorted(os.listdir(out)), ["byteps_mxnet.py", "commtune_config.json", "use_byteps.py"])
            proc = ct.shell_as_documented(ct.documented_check_command(os.path.join(out, "use_byteps.py")), out,
                                          timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stdout[-2000:] + proc.stderr[-3000:])
            self.assertIn("use_byteps.py: 6 steps on 2 ranks (gloo)", proc.stdout)


if __name__ == "__main__":
    unittest.main()

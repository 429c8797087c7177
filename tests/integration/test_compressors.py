"""BytePS-style compressors in training: every compressor with error
feedback and Nesterov momentum trains on 2 and 4 ranks to within a stated
margin of allreduce, and so does two-level compression (nodes of 2 ranks);
the bytes on the wire are the formats' formulas; every
rank ends with the same parameters; a run resumed from a checkpoint repeats
the uninterrupted one (error and momentum memories, random generators);
BytePS's key names, misspelt or out of range, are clear errors.

Stated margin: over 300 steps of the default task, each compressor achieves
at least 80% of allreduce's loss reduction (initial minus tail loss)."""
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

MARGIN = 0.8
COMPRESSORS = {
    "onebit": {"hook.byteps_compressor_type": "onebit"},
    "topk": {"hook.byteps_compressor_type": "topk", "hook.byteps_compressor_k": 0.01},
    "randomk": {"hook.byteps_compressor_type": "randomk", "hook.byteps_compressor_k": 0.1,
                "hook.byteps_momentum_mu": 0.5},
    "dithering": {"hook.byteps_compressor_type": "dithering", "hook.byteps_compressor_k": 4},
}
WITH_EF_AND_MOMENTUM = {"hook.name": "byteps", "hook.byteps_ef_type": "vanilla",
                        "hook.byteps_momentum_type": "nesterov", "optimizer.momentum": 0}


def tail_loss(run):
    losses = run.losses()
    steps = len(losses[0])
    window = max(1, min(50, steps // 10))
    return sum(sum(rank[-window:]) for rank in losses) / (window * len(losses))


def payload_bytes(kind, settings, n):
    """The wire format's size for a bucket of n float32 elements (docs/compressors.md)."""
    if kind == "onebit":
        return 4 + 4 * math.ceil(n / 32)
    k = settings["hook.byteps_compressor_k"]
    k = math.ceil(k * n) if k < 1 else int(k)
    return 8 * max(1, min(k, n))


class Training(unittest.TestCase):
    def check_world(self, world):
        with tempfile.TemporaryDirectory() as d:
            common = {"world_size": world, "steps": 300}
            baseline = ct.run_commtune(d, dict(common, **{"hook.name": "allreduce"}), extra_args=["--no-store"])
            initial = sum(rank[0] for rank in baseline.losses()) / world
            reference = initial - tail_loss(baseline)
            for kind, settings in COMPRESSORS.items():
                with self.subTest(compressor=kind, world=world):
                    run = ct.run_commtune(d, dict(common, **WITH_EF_AND_MOMENTUM, **settings),
                                          extra_args=["--no-store"])
                    achieved = initial - tail_loss(run)
                    self.assertGreater(achieved, MARGIN * reference,
                                       f"{kind}: loss reduced by {achieved:.3f}, allreduce by {reference:.3f}")
                    self.assertTrue(run.summary["ranks_in_sync"])
                    # Fixed-size formats: (p - 1) payloads per compressed bucket on the wire.
                    if kind in ("onebit", "topk", "randomk"):
                        expected = 0
                        for bucket in run.summary["buckets"]:
                            n = bucket["numel"]
                            if 4 * n < 65536:
                                expected += 2 * (world - 1) / world * 4 * n
                            else:
                                expected += (world - 1) * payload_bytes(kind, settings, n)
                        self.assertAlmostEqual(run.summary["traffic"]["wire_bytes_per_step"], expected, delta=1)

    def test_every_compressor_trains_on_two_ranks(self):
        self.check_world(2)

    def test_every_compressor_trains_on_four_ranks(self):
        self.check_world(4)


class TwoLevel(unittest.TestCase):
    def test_nodes_sum_in_fp16_and_leaders_exchange_compressed(self):
        world, per_node = 4, 2
        with tempfile.TemporaryDirectory() as d:
            common = {"world_size": world, "steps": 300}
            baseline = ct.run_commtune(d, dict(common, **{"hook.name": "allreduce"}), extra_args=["--no-store"])
            initial = sum(rank[0] for rank in baseline.losses()) / world
            run = ct.run_commtune(d, dict(common, **WITH_EF_AND_MOMENTUM, **COMPRESSORS["onebit"],
                                          **{"hook.ranks_per_node": per_node}), extra_args=["--no-store"])
            self.assertGreater(initial - tail_loss(run), MARGIN * (initial - tail_loss(baseline)))
            self.assertTrue(run.summary["ranks_in_sync"])
            # Per rank on average: the node's fp16 ring allreduce and float32 broadcast, plus, on the
            # leaders (half the ranks), the allgather of the other node's payload.
            leaders = world // per_node
            expected = 0
            for bucket in run.summary["buckets"]:
                n = bucket["numel"]
                share = (per_node - 1) / per_node
                expected += 2 * share * 2 * n + share * 4 * n
                expected += leaders / world * (leaders - 1) * payload_bytes("onebit", {}, n)
            self.assertAlmostEqual(run.summary["traffic"]["wire_bytes_per_step"], expected, delta=1)


class State(unittest.TestCase):
    def test_a_resumed_run_repeats_the_uninterrupted_one(self):
        settings = dict(WITH_EF_AND_MOMENTUM, **COMPRESSORS["randomk"], **{"model.hidden": 256, "world_size": 2})
        ct.check_resume_repeats(self, settings, steps=20, resume_at=8)

    def test_the_device_path_trains_as_the_host_path(self):
        """The path a GPU bucket takes (compressed, gathered and decoded where it
        lives), run here on CPU buckets: every rank's loss at every step is the
        host path's, bit for bit, and a run resumed on one path from a checkpoint
        of the other repeats the uninterrupted run (the state has one layout)."""
        with tempfile.TemporaryDirectory() as d:
            for kind in ("onebit", "topk", "randomk"):
                with self.subTest(compressor=kind):
                    settings = dict(WITH_EF_AND_MOMENTUM, **COMPRESSORS[kind], steps=30, world_size=2)
                    host = ct.run_commtune(d, dict(settings, **{"hook.byteps_compress_on": "host"}),
                                           extra_args=["--no-store"])
                    device = ct.run_commtune(d, dict(settings, **{"hook.byteps_compress_on": "device"}),
                                             extra_args=["--no-store"])
                    self.assertEqual(device.losses(), host.losses())
                    self.assertEqual(device.summary["traffic"]["wire_bytes_per_step"],
                                     host.summary["traffic"]["wire_bytes_per_step"])
            settings = dict(WITH_EF_AND_MOMENTUM, **COMPRESSORS["topk"], **{"model.hidden": 256, "world_size": 2})
            ct.check_resume_repeats(self, dict(settings, **{"hook.byteps_compress_on": "host"}), steps=20, resume_at=8,
                                    resume_settings={"hook.byteps_compress_on": "device"})


class Export(unittest.TestCase):
    def test_production_export_gives_bytepss_compression_params(self):
        ct.fresh_store()
        with tempfile.TemporaryDirectory() as d:
            run = ct.run_commtune(d, dict(WITH_EF_AND_MOMENTUM, **COMPRESSORS["onebit"], steps=3))
            out = os.path.join(d, "export")
            ct.cli("export", "production", "--run", run.summary["run_id"], "--out", out)
            self.assertEqual(sorted(os.listdir(out)), ["byteps_compression.py", "commtune_config.json"])
            namespace = {}
            exec(open(os.path.join(out, "byteps_compression.py")).read(), namespace)
            self.assertEqual(namespace["compression_params"],
                             {"compressor": "onebit", "ef": "vanilla", "momentum": "nesterov", "momentum_mu": 0.9,
                              "scaling": True})


class Settings(unittest.TestCase):
    def run_bad(self, **overrides):
        with tempfile.TemporaryDirectory() as d:
            run = ct.run_commtune(d, dict({"hook.name": "byteps", "steps": 2}, **overrides), check=False,
                                  extra_args=["--no-store"])
        self.assertEqual(run.returncode, 2, run.stderr)
        return run.stderr

    def test_a_misspelt_key_is_an_error_with_a_suggestion(self):
        stderr = self.run_bad(**{"hook.byteps_compresor_type": "topk"})
        self.assertIn("hook.byteps_compresor_type", stderr)
        self.assertIn("byteps_compressor_type", stderr)

    def test_a_wrong_value_names_what_is_allowed(self):
        stderr = self.run_bad(**{"hook.byteps_compressor_type": "twobit"})
        self.assertIn("onebit", stderr)
        stderr = self.run_bad(**{"hook.byteps_dithering_partition": 2})
        self.assertIn("hook.byteps_dithering_partition", stderr)

    def test_nodes_must_divide_the_world(self):
        stderr = self.run_bad(**{"hook.ranks_per_node": 3, "world_size": 4})
        self.assertIn("hook.ranks_per_node", stderr)

    def test_dithering_has_no_device_path(self):
        stderr = self.run_bad(**{"hook.byteps_compressor_type": "dithering", "hook.byteps_compressor_k": 4,
                                 "hook.byteps_compress_on": "device"})
        self.assertIn("hook.byteps_compress_on", stderr)

    def test_rescaled_randomk_refuses_error_feedback(self):
        stderr = self.run_bad(**{"hook.byteps_compressor_type": "randomk", "hook.byteps_ef_type": "vanilla",
                                 "hook.byteps_compressor_randomk_rescale": True})
        self.assertIn("hook.byteps_compressor_randomk_rescale", stderr)


if __name__ == "__main__":
    unittest.main()

"""Plugins: the example plugin (plugins/examples/threshold_sparsify.cpp),
built as a plugin author builds one, appears in `plugins`, `params` and sweep
axes like a built-in, a 2-rank run with its hook matches the same arithmetic
in PyTorch's DDP, and its compressor (TernGrad) trains and sends what its
format says, checked as the built-in compressors are; a plugin built for another SDK version and libraries that
are no plugins are refused with a reason, and commtune goes on without them."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_compressors import tail_loss  # noqa: E402

TERNGRAD_MARGIN = 0.7  # of allreduce's loss reduction (the built-ins with EF and momentum: 0.8)

PLUGINS = os.path.join(ct.BUILD, "plugins", "lib")
STALE = os.path.join(ct.BUILD, "plugins", "stale")
REFERENCE = os.path.join(ct.REPO, "tests", "oracle", "commtune_reference.py")


class ExamplePlugin(unittest.TestCase):
    def setUp(self):
        os.environ["COMMTUNE_PLUGIN_PATH"] = PLUGINS
        ct.fresh_store()

    def tearDown(self):
        del os.environ["COMMTUNE_PLUGIN_PATH"]

    def test_it_is_listed_like_a_built_in(self):
        listing = ct.cli_json("plugins")
        self.assertEqual(listing["folders"], [PLUGINS])
        [plugin] = listing["plugins"]
        self.assertTrue(plugin["loaded"], plugin)
        self.assertEqual(plugin["added"], ["compressor terngrad", "hook threshold_sparsify"])
        schema = json.loads(ct.cli("params", "--json").stdout)
        hooks = next(s for s in schema["sections"] if s["section"] == "hook")
        entry = next(e for e in hooks["entries"] if e["name"] == "threshold_sparsify")
        self.assertEqual([p["name"] for p in entry["params"]], ["threshold"])
        byteps = next(e for e in hooks["entries"] if e["name"] == "byteps")
        kinds = next(p for p in byteps["params"] if p["name"] == "byteps_compressor_type")["choices"]
        self.assertEqual(kinds, ["onebit", "topk", "randomk", "dithering", "terngrad"])
        plan = ct.cli("sweep", "--plan", "--set", "hook.name=threshold_sparsify",
                      "--axis", "hook.threshold=0.0001,0.001,0.01").stdout
        self.assertEqual(plan.count("threshold="), 3)
        bad = ct.cli("run", "--set", "hook.name=threshold_sparsify", "--set", "hook.threshold=-1", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("hook.threshold", bad.stderr)

    def test_a_two_rank_run_matches_pytorch(self):
        with tempfile.TemporaryDirectory() as d:
            init = os.path.join(d, "init.pt")
            run = ct.run_commtune(d, {"world_size": 2, "steps": 20, "hook.name": "threshold_sparsify",
                                      "hook.threshold": 2e-3, "weights.save_initial": init})
            out = os.path.join(d, "ref.json")
            proc = subprocess.run([ct.ORACLE_PYTHON, REFERENCE, "--config", os.path.join(d, "summary.json"),
                                   "--init", init, "--out", out], capture_output=True, text=True, timeout=240)
            self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
            reference = json.load(open(out))["losses"]
            for mine, theirs in zip(run.losses(), reference):
                for a, b in zip(mine, theirs):
                    self.assertLessEqual(abs(a - b), 1e-6 * abs(b))
            kept = ct.query("SELECT avg(value) FROM step_stats s JOIN stat_names n ON n.id = s.stat_id "
                            "WHERE n.name = 'kept_fraction'")[0][0]
            self.assertTrue(0.01 < kept < 0.99, kept)  # the threshold dropped some elements, not all


    def test_its_compressor_trains_like_a_built_in(self):
        with tempfile.TemporaryDirectory() as d:
            # One scale per bucket (no per-layer scaling or clipping, which the paper adds) diverges at lr 0.05
            # on this task; at 0.02 it reaches ~79% of allreduce's loss reduction with a 256-wide MLP (measured
            # 1.51 vs 1.93; 89% with the default 1024-wide one, in four times the test's time).
            common = {"world_size": 2, "steps": 300, "optimizer.lr": 0.02, "model.hidden": 256}
            baseline = ct.run_commtune(d, dict(common, **{"hook.name": "allreduce"}), extra_args=["--no-store"])
            initial = sum(rank[0] for rank in baseline.losses()) / 2
            # As in the TernGrad paper: no error feedback (its unbiased outputs can exceed the input, so the
            # residual would grow, as with rescaled randomk), the optimizer's own momentum.
            run = ct.run_commtune(d, dict(common, **{"hook.name": "byteps", "hook.byteps_compressor_type": "terngrad"}),
                                  extra_args=["--no-store"])
            achieved, reference = initial - tail_loss(run), initial - tail_loss(baseline)
            self.assertGreater(achieved, TERNGRAD_MARGIN * reference, f"terngrad {achieved:.3f}, allreduce {reference:.3f}")
            self.assertTrue(run.summary["ranks_in_sync"])
            # On the wire, BytePS's push and pull: 2 bits per element and a float scale per compressed
            # partition; small parameters go raw.
            pushed = sum(ct.byteps_pushed_bytes(lambda m: 4 + (m + 3) // 4, n)
                         for n in ct.mlp_parameter_sizes(run.summary["config"]).values())
            self.assertAlmostEqual(run.summary["traffic"]["wire_bytes_per_step"], 2 * pushed, delta=1)


class RefusedPlugins(unittest.TestCase):
    def test_stale_and_foreign_libraries_are_refused_and_commtune_goes_on(self):
        with tempfile.TemporaryDirectory() as junk:
            open(os.path.join(junk, "empty.so"), "w").close()
            os.environ["COMMTUNE_PLUGIN_PATH"] = f"{STALE}:{junk}"
            try:
                listing = ct.cli_json("plugins")
                reasons = {os.path.basename(p["path"]): p["reason"] for p in listing["plugins"]}
                self.assertFalse(any(p["loaded"] for p in listing["plugins"]))
                self.assertIn("sdk=999", reasons["stale_threshold_sparsify.so"])
                self.assertIn("rebuild the plugin", reasons["stale_threshold_sparsify.so"])
                self.assertIn("cannot be loaded", reasons["empty.so"])
                with tempfile.TemporaryDirectory() as d:
                    ct.run_commtune(d, {"steps": 3}, extra_args=["--no-store"])  # built-ins still work
                    missing = ct.run_commtune(d, {"steps": 3, "hook.name": "threshold_sparsify"}, check=False,
                                              extra_args=["--no-store"])
                self.assertEqual(missing.returncode, 2)
                self.assertIn("hook.name", missing.stderr)
            finally:
                del os.environ["COMMTUNE_PLUGIN_PATH"]


if __name__ == "__main__":
    unittest.main()

"""Plugins: the example plugin (plugins/examples/threshold_sparsify.cpp),
built as a plugin author builds one, appears in `plugins`, `params` and sweep
axes like a built-in, and a 2-rank run with it matches the same arithmetic
in PyTorch's DDP; a plugin built for another SDK version and libraries that
are no plugins are refused with a reason, and commtune goes on without them."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

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
        self.assertEqual(plugin["added"], ["hook threshold_sparsify"])
        schema = json.loads(ct.cli("params", "--json").stdout)
        hooks = next(s for s in schema["sections"] if s["section"] == "hook")
        entry = next(e for e in hooks["entries"] if e["name"] == "threshold_sparsify")
        self.assertEqual([p["name"] for p in entry["params"]], ["threshold"])
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

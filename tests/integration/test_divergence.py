"""Runs whose loss goes NaN or infinite: each rank notices at the step it
happens, the run ends `diverged` (exit code 3) naming the step and the rank,
or runs on when asked (--on-nonfinite=warn) and is still diverged; the store
keeps the NaN as NaN, and no view, ranking or recommendation puts such a run
ahead of one that trained."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

EXIT_DIVERGED = 3


def stored_losses(run_id):
    """(rank, step, loss as stored, SQLite's type of it), in order."""
    return ct.query("SELECT rank, step, loss, typeof(loss) FROM step_metrics WHERE run_id = ? ORDER BY step, rank",
                    (run_id,))


def run_id_of(stderr):
    return int(stderr.split("stored as run ")[1].split()[0])


class Divergence(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def assert_diverged(self, proc, summary, steps_requested):
        self.assertEqual(proc.returncode, EXIT_DIVERGED, proc.stderr)
        self.assertEqual(summary["status"], "diverged")
        self.assertRegex(summary["reason"], r"rank \d's loss is (nan|inf) at step \d+")
        self.assertIn("commtune: diverged (rank", proc.stderr)
        nonfinite = summary["nonfinite"]
        self.assertEqual(nonfinite["what"], "loss")
        self.assertIn(nonfinite["value"], ("nan", "inf"))
        self.assertLess(summary["steps"]["completed"], steps_requested)
        return nonfinite

    def run_cli(self, d, *args):
        summary_path = os.path.join(d, "summary.json")
        proc = ct.cli("run", "--quiet", "--summary", summary_path, *args, check=False)
        return proc, json.load(open(summary_path))

    def test_a_large_learning_rate_stops_the_run_as_diverged_at_the_step_it_happened(self):
        with tempfile.TemporaryDirectory() as d:
            proc, summary = self.run_cli(d, "--set", "steps=40", "--set", "hook.name=fp16_compress", "--set",
                                         "optimizer.lr=10")
            nonfinite = self.assert_diverged(proc, summary, 40)
            run = run_id_of(proc.stderr)
            status, steps, final_loss = ct.query("SELECT status, steps_completed, final_loss FROM runs WHERE id = ?",
                                                 (run,))[0]
            self.assertEqual(status, "diverged")
            self.assertEqual(steps, nonfinite["step"] + 1)  # the step that diverged is stored, none after it
            # NaN is kept as NaN (SQLite would turn a NaN REAL into NULL), and read back as such.
            self.assertEqual(final_loss, "NaN")
            rows = stored_losses(run)
            self.assertEqual(max(step for _, step, _, _ in rows), nonfinite["step"])
            self.assertIn(("NaN", "text"), [(loss, kind) for _, _, loss, kind in rows])
            self.assertTrue(all(kind in ("real", "text") for _, _, _, kind in rows))
            shown = ct.cli_json("show", run)
            self.assertEqual(shown["status"], "diverged")
            self.assertEqual(shown["final_loss"], "nan")
            self.assertEqual(shown["digest"]["tail_loss"], "inf")
            listed = ct.cli("list", "--status", "diverged").stdout
            self.assertIn("diverged", listed)
            self.assertIn("nan", listed)

    def test_warn_runs_every_step_and_the_run_is_still_diverged(self):
        with tempfile.TemporaryDirectory() as d:
            proc, summary = self.run_cli(d, "--set", "steps=20", "--set", "optimizer.lr=10", "--on-nonfinite=warn")
            self.assertEqual(proc.returncode, EXIT_DIVERGED, proc.stderr)
            self.assertEqual(summary["status"], "diverged")
            self.assertEqual(summary["steps"]["completed"], 20)
            self.assertEqual(summary["loss"]["final"], "nan")
            run = run_id_of(proc.stderr)
            self.assertEqual(ct.query("SELECT status, steps_completed FROM runs WHERE id = ?", (run,))[0],
                             ("diverged", 20))

    def test_a_torchscript_model_returning_nan_logits(self):
        with tempfile.TemporaryDirectory() as d:
            path = ct.torchscript_model(d, "self.fc(x) * float('nan')")
            proc, summary = self.run_cli(d, "--set", "steps=10", "--set", "model.name=torchscript", "--set",
                                         f"model.path={path}", "--set", "data.features=32", "--set", "data.classes=5")
            nonfinite = self.assert_diverged(proc, summary, 10)
            self.assertEqual(nonfinite["step"], 0)

    def test_weights_that_are_all_nan(self):
        with tempfile.TemporaryDirectory() as d:
            initial = os.path.join(d, "initial.pt")
            ct.cli("run", "--quiet", "--no-store", "--summary", os.path.join(d, "s.json"), "--set", "steps=1",
                   "--set", f"weights.save_initial={initial}")
            poisoned = os.path.join(d, "nan.pt")
            subprocess.run([ct.ORACLE_PYTHON, "-c",
                            "import torch, sys\n"
                            "w = torch.load(sys.argv[1])\n"
                            "torch.save({k: torch.full_like(v, float('nan')) for k, v in w.items()}, sys.argv[2])\n",
                            initial, poisoned], check=True)
            proc, summary = self.run_cli(d, "--set", "steps=10", "--set", f"weights.init={poisoned}")
            nonfinite = self.assert_diverged(proc, summary, 10)
            self.assertEqual(nonfinite["step"], 0)

    def test_a_diverged_trial_is_never_ranked_or_recommended(self):
        proc = ct.cli("sweep", "--name", "lr", "--set", "steps=40", "--set", "hook.name=fp16_compress", "--axis",
                      "optimizer.lr=0.05,10")
        self.assertIn("diverged", proc.stderr)
        trials = {t["name"]: t for t in ct.cli_json("show", "--sweep", 1)["trials"]}
        # (its allreduce baseline at lr=10 diverges too)
        diverged = [t for name, t in trials.items() if "lr=10" in name and not name.startswith("baseline")]
        self.assertEqual(len(diverged), 1, trials)
        self.assertEqual(diverged[0]["status"], "diverged")
        diverged_run = diverged[0]["run_id"]

        compared = ct.cli_json("compare", "--sweep", 1)
        row = next(r for r in compared["runs"] if r["id"] == diverged_run)
        self.assertEqual(row["digest"]["tail_loss"], "inf")
        self.assertIsNone(row["loss_change"])  # not -100%
        table = ct.cli("compare", "--sweep", 1).stdout
        line = next(line for line in table.splitlines() if line.split()[0] == str(diverged_run))
        self.assertIn("inf", line.split())

        # However loose the tolerance, a diverged run is not a candidate.
        for tolerance in ("0.01", "10"):
            advice = ct.cli_json("recommend", "--sweep", 1, "--network", "1gbit", "--tolerance", tolerance)
            self.assertNotEqual(advice["chosen_run"], diverged_run, advice["verdict"])
            candidate = next(c for c in advice["candidates"] if c["run_id"] == diverged_run)
            self.assertIn("diverged", candidate["excluded"])

    def test_successive_halving_never_promotes_a_diverged_trial(self):
        proc = ct.cli("sweep", "--set", "steps=24", "--axis", "optimizer.lr=0.02,0.05,0.1,10", "--early-stop", "8:2",
                      "--no-baseline")
        trials = {t["name"]: t for t in ct.cli_json("show", "--sweep", 1)["trials"]}
        self.assertEqual(trials["lr=10"]["status"], "diverged", trials)
        self.assertLessEqual(trials["lr=10"]["steps_completed"], 8)  # it diverged in the first rung, and ran no more
        self.assertEqual(proc.stderr.count("lr=10: starts"), 1)
        self.assertNotIn("lr=10: continues", proc.stderr)
        # The diverged trial still counts in its rung: two of four go on from step 8, one to the end.
        self.assertEqual(sum(t["steps_completed"] >= 16 for t in trials.values()), 2, trials)
        self.assertEqual([t["status"] for t in trials.values()].count("succeeded"), 1, trials)

if __name__ == "__main__":
    unittest.main()

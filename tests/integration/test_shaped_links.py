"""The what-if model against real bandwidth-limited links (docs/network-model.md,
"How good it is"): bench/shaped_links.py at a smaller size. Two ranks train
inside a network namespace whose loopback a token bucket filter limits to a
known rate; each hook is predicted for that link from its unshaped run (all
hooks' unshaped runs together, as one sweep: one pooled compute profile),
and the prediction and the link emulation are compared with the shaped run.

Bounds: the rows where the link sets the pace (its predicted step is at
least 4x the unshaped one) within 0.7-1.4 of the shaped run, their median
error under 15%; the emulated runs within 0.6-1.6. The rows where compute
sets the pace within 0.33-3: there the error is how much compute varies
between two runs on two shared cores, not the model (a fastest-of-three
shaped PowerSGD step of 7.3 ms against its 10.2 ms unshaped run, seen
beside the suite's other tests). A row outside its bounds is measured
again, shaped and emulated, up to twice, keeping each one's fastest run.
The benchmark holds the model to 0.85-1.15 on an idle machine
(bench/RESULTS.md, three rates); these bounds leave room for a machine
doing other work. One rate (50 Mbit/s), four hooks and short runs keep the
test near a minute, most of it waiting on the link. Before the model took
each bucket's chain in wall time and Gloo's overlap of reduction and
transfer into account, PowerSGD at rank 1 was predicted at 0.51 of its 100
Mbit/s run.

Needs root and iproute2's `ip` and `tc` (a network namespace and a qdisc);
skipped, saying which is missing, otherwise."""
import importlib.util
import os
import statistics
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

spec = importlib.util.spec_from_file_location("shaped_links", os.path.join(ct.REPO, "bench", "shaped_links.py"))
shaped_links = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shaped_links)

MODEL = ["data.features=256", "model.hidden=512", "model.layers=2"]  # 0.4M parameters, 1.6 MB of gradients
HOOKS = ["allreduce", "fp16", "powersgd_r1", "topk"]  # bench/shaped_links.py adds PowerSGD at rank 4
RATES = [50]
STEPS = 8  # 16 at 50 Mbit/s: a link-bound step varies by 1-2%
REMEASUREMENTS = 2
COMPUTE_BOUND = (0.33, 3.0)


def link_bound(row):
    """Whether the link adds at least three quarters of the predicted step to the unshaped one."""
    return row["predicted_ms"] >= 4 * row["unshaped_ms"]


def prediction_bounds(row):
    return (0.7, 1.4) if link_bound(row) else COMPUTE_BOUND


def emulation_bounds(row):
    return (0.6, 1.6) if link_bound(row) else COMPUTE_BOUND


def within_bounds(row):
    low, high = prediction_bounds(row)
    e_low, e_high = emulation_bounds(row)
    return low < row["predicted_ratio"] < high and e_low < row["emulated_ratio"] < e_high


class ShapedLinks(unittest.TestCase):
    def test_predictions_and_emulation_match_links_shaped_by_tc(self):
        why = shaped_links.unavailable()
        if why:
            self.skipTest(why)
        ct.fresh_store()
        with tempfile.TemporaryDirectory() as scratch:
            rows = shaped_links.measure(RATES, HOOKS, MODEL, steps=STEPS, emulate=True, keep=scratch)
            for row in rows:
                for _ in range(REMEASUREMENTS):
                    if within_bounds(row):
                        break
                    shaped_links.remeasure(row, MODEL, STEPS)
        self.assertEqual(len(rows), len(HOOKS) * len(RATES))
        report = "\n".join(f"{r['hook']} at {r['rate_mbit']} Mbit/s: measured {r['measured_ms']:.1f} ms "
                           f"(attempts {', '.join(f'{a:.1f}' for a in r.get('measured_attempts_ms', [r['measured_ms']]))}), "
                           f"unshaped {r['unshaped_ms']:.1f}, predicted {r['predicted_ms']:.1f} "
                           f"({r['predicted_ratio']:.2f}, {'link' if link_bound(r) else 'compute'}-bound), emulated "
                           f"{r['emulated_ms']:.1f} ({r['emulated_ratio']:.2f}; attempts "
                           f"{', '.join(f'{a:.1f}' for a in r.get('emulated_attempts_ms', [r['emulated_ms']]))})"
                           for r in rows)
        for r in rows:
            with self.subTest(hook=r["hook"], rate=r["rate_mbit"]):
                low, high = prediction_bounds(r)
                self.assertGreater(r["predicted_ratio"], low, report)
                self.assertLess(r["predicted_ratio"], high, report)
                low, high = emulation_bounds(r)
                self.assertGreater(r["emulated_ratio"], low, report)
                self.assertLess(r["emulated_ratio"], high, report)
        paced = [r for r in rows if link_bound(r)]
        self.assertGreaterEqual(len(paced), 2, report)
        self.assertLess(statistics.median(abs(r["predicted_ratio"] - 1) for r in paced), 0.15, report)
        # The link sets the pace: the shaped allreduce is several times slower than unshaped.
        allreduce = next(r for r in rows if r["hook"] == "allreduce")
        self.assertGreater(allreduce["measured_ms"], 5 * allreduce["unshaped_ms"], report)

    def test_runs_measured_on_different_links_are_not_replicates(self):
        # `predict` must not pool an unshaped run and the same configuration behind a shaper into one row, as
        # if they were repeats. Each run probes its link as it starts; their probes differ many times over.
        why = shaped_links.unavailable()
        if why:
            self.skipTest(why)
        ct.fresh_store()
        sets = ["world_size=2", f"steps={STEPS}", *MODEL]
        with tempfile.TemporaryDirectory() as scratch:
            with shaped_links.namespace() as bare:
                unshaped = shaped_links.run(bare, sets, scratch)
            with shaped_links.namespace(50) as narrow:
                shaped = shaped_links.run(narrow, sets, scratch)
        rows = ct.cli_json("predict", unshaped, shaped)["runs"]
        self.assertEqual(sorted(r["runs"] for r in rows), [[unshaped], [shaped]], rows)
        self.assertTrue(all("(measured link" in r["label"] for r in rows), [r["label"] for r in rows])
        links = sorted(r["profile"]["link_bytes_per_s"] for r in rows)
        self.assertGreater(links[1], 8 * links[0], links)
        # Two runs on one link stay one configuration, replicated.
        with tempfile.TemporaryDirectory() as scratch, shaped_links.namespace() as bare:
            again = shaped_links.run(bare, sets, scratch)
        rows = ct.cli_json("predict", unshaped, again)["runs"]
        self.assertEqual([r["runs"] for r in rows], [[unshaped, again]], rows)


if __name__ == "__main__":
    unittest.main()

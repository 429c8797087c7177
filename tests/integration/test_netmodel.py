"""Will it pay off? The step-time model against runs whose collectives the
link emulator slowed to a target network's speed, at two bandwidths; the
recommendation that picks compression on a slow network and keeps
allreduce on a fast one; and its export, run in a real PyTorch DDP job.

Stated error, on the default MLP (5.3 MB of gradients, two buckets, two
ranks): the predicted difference in step time between 200 Mbit/s and
1 Gbit/s against the emulated runs' difference, 10% for allreduce and 35%
for fp16 compression (Gloo's fp16 sums cost CPU time that varies from run to
run); and for allreduce at 200 Mbit/s, where the link's time is nearly all
of the step, the prediction itself within 20%. Differences rather than
absolute times: compute that other work on the machine slows cancels out
(docs/network-model.md has the absolute numbers of an idle machine); when
that work comes and goes between the runs, they are measured again, up to
twice, each keeping its fastest."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

MODEL_ERROR = {"allreduce": 0.10, "fp16_compress": 0.35}


def stored_run(*args):
    with tempfile.TemporaryDirectory() as d:
        proc = ct.cli("run", "--quiet", "--summary", os.path.join(d, "s.json"), "--set", "world_size=2", *args)
    return int(proc.stderr.rsplit("stored as run ", 1)[1].split()[0])


def step_ms(run_id):
    return ct.cli_json("show", run_id)["digest"]["step_ms"]


def find_key(node, key):
    """Every value under `key` anywhere in a JSON document."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key] + [x for v in node.values() for x in find_key(v, key)]
    if isinstance(node, list):
        return [x for v in node for x in find_key(v, key)]
    return []


class OneFigureEverywhere(unittest.TestCase):
    """ms/step, last loss and tail loss are defined once (core/tuner/store/run_metrics.h):
    the sweep's line, show, compare, predict, list and the run summary agree."""

    def setUp(self):
        ct.fresh_store()

    def test_step_time_and_losses_agree_across_views(self):
        proc = ct.cli("sweep", "--set", "steps=30", "--axis", "hook.name=allreduce,fp16_compress", "--no-baseline")
        for run_id in (1, 2):
            shown = ct.cli_json("show", run_id)
            digest = shown["digest"]
            compared = next(r for r in ct.cli_json("compare", 1, 2)["runs"] if r["id"] == run_id)
            self.assertEqual(compared["digest"], digest)
            measured = find_key(ct.cli_json("predict", run_id), "measured_step_s")
            # The same median in seconds: equal up to the rounding of the ms -> s conversion.
            self.assertEqual(len(measured), 1, "predict's measured step time")
            self.assertAlmostEqual(measured[0], digest["step_ms"] / 1e3, delta=1e-12 * measured[0],
                                   msg="predict's measured step time")
            line = next(line for line in proc.stderr.splitlines() if f"run {run_id}]" in line and "ms/step" in line)
            self.assertIn(f"{digest['step_ms']:.2f} ms/step", line)
            self.assertIn(f"tail loss {digest['tail_loss']:.5f}", line)
            summary = shown["summary"]
            self.assertAlmostEqual(summary["step_time_ms"]["median"], digest["step_ms"], delta=1e-9 * digest["step_ms"])
            self.assertEqual(summary["loss"]["final"], digest["last_loss"])
            listed = next(r for r in ct.cli_json("list") if r["id"] == run_id)
            self.assertEqual(listed["final_loss"], digest["last_loss"])


class CostModel(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def test_prediction_matches_emulated_links_at_two_bandwidths(self):
        targets = {"custom_200mbit": (["--bandwidth-gbit", "0.2", "--latency-us", "50"],
                                      ["network.emulate=custom", "network.bandwidth_gbit_s=0.2",
                                       "network.latency_us=50"]),
                   "1gbit": (["--network", "1gbit"], ["network.emulate=1gbit"])}
        for hook in ("allreduce", "fp16_compress"):
            local = stored_run("--set", "steps=40", "--set", f"hook.name={hook}")
            predicted, measured = {}, {}

            def emulated(target):
                sets = [a for e in targets[target][1] for a in ("--set", e)]
                return step_ms(stored_run("--set", "steps=24", "--set", f"hook.name={hook}", *sets))

            for target, (predict_args, _) in targets.items():
                predicted[target] = ct.cli_json("predict", local, *predict_args)["runs"][0]["predictions"][0]
                measured[target] = emulated(target)
                # The network dominates at these speeds: the prediction is not just the local time.
                self.assertGreater(predicted[target]["exposed_s"], 0.5 * predicted[target]["step_s"])
            # What the model adds to the measured compute is the link's time: the step time it predicts
            # between the two links against the emulated runs'. The compute, which another program on the
            # machine can slow down, cancels out of the difference, unless the other program comes and goes
            # between the runs: then both are measured again, up to twice, keeping each one's fastest.
            predicted_gap = 1e3 * (predicted["custom_200mbit"]["step_s"] - predicted["1gbit"]["step_s"])

            def error():
                measured_gap = measured["custom_200mbit"] - measured["1gbit"]
                return abs(predicted_gap - measured_gap) / measured_gap, measured_gap

            for _ in range(2):
                if error()[0] < MODEL_ERROR[hook]:
                    break
                for target in targets:
                    measured[target] = min(measured[target], emulated(target))
            with self.subTest(hook=hook):
                relative, measured_gap = error()
                self.assertLess(relative, MODEL_ERROR[hook],
                                f"200 Mbit/s against 1 Gbit/s: predicted {predicted_gap:.2f} ms more, "
                                f"the emulated runs took {measured_gap:.2f} ms more ({measured})")
            if hook == "allreduce":  # the link's time is nearly all of it: the prediction itself holds
                self.assertLess(abs(1e3 * predicted["custom_200mbit"]["step_s"] - measured["custom_200mbit"])
                                / measured["custom_200mbit"], 2 * MODEL_ERROR[hook], measured)

    def test_subgroup_collectives_stay_in_their_node(self):
        # Two-level compression on 2 nodes x 2 ranks: the fp16 sum and the broadcast back run among each node's
        # 2 consecutive ranks, the onebit exchange among the 2 node leaders (ranks 0 and 2).
        run = stored_run("--set", "world_size=4", "--set", "steps=24", "--set", "hook.name=byteps",
                         "--set", "hook.byteps_compressor_type=onebit", "--set", "hook.ranks_per_node=2",
                         "--set", "hook.byteps_aggregation=allgather")
        links = {"1gbit": (1e9 / 8, 50e-6), "nvlink": (150e9, 2e-6)}

        def ring(kind, n, p, link):
            b, a = links[link]
            return {"allreduce": 2 * (p - 1) * a + 2 * (p - 1) / p * n / b,
                    "allgather": (p - 1) * a + (p - 1) * n / b,
                    "broadcast": (p - 1) * a + n / b}[kind] if p > 1 else 0

        def communication(profile, ranks_per_node):
            total = 0
            uses = [c for b in profile["buckets"] for c in b["collectives"]] + profile["step_collectives"]
            for c in uses:
                group = c.get("group", {"size": 4, "stride": 1})
                one_node = group["stride"] * (group["size"] - 1) < ranks_per_node
                link = "nvlink" if one_node else "1gbit"
                total += c["calls"] * ring(c["kind"], c["bytes"] / c["calls"], group["size"], link)
            return total

        for ranks_per_node in (2, 1):
            with self.subTest(ranks_per_node=ranks_per_node):
                out = ct.cli_json("predict", run, "--network", "1gbit", "--gpus-per-node", ranks_per_node,
                                  "--nodes", 4 // ranks_per_node)["runs"][0]
                groups = {(c["kind"], c.get("group", {}).get("size"), c.get("group", {}).get("stride"))
                          for b in out["profile"]["buckets"] for c in b["collectives"]}
                self.assertIn(("allreduce", 2, 1), groups)  # the node's fp16 sum
                self.assertIn(("broadcast", 2, 1), groups)  # the result back to the node
                self.assertIn(("allgather", 2, 2), groups)  # the leaders' payloads
                predicted = out["predictions"][0]["communication_s"]
                expected = communication(out["profile"], ranks_per_node)
                self.assertAlmostEqual(predicted, expected, delta=1e-9 + 1e-9 * expected)
                if ranks_per_node == 2:
                    in_nodes = predicted
        # With every rank on its own node the node collectives cross the slow link too.
        self.assertGreater(predicted, 2 * in_nodes)

    def test_byteps_is_priced_as_bytepss_push_and_pull(self):
        """The byteps hook (BytePS's algorithm) carries its pushes by an allgather here, but the
        step records, and the model prices, what a BytePS worker sends: its push and its pull,
        2a + (push + pull)/B per bucket (docs/network-model.md)."""
        run = stored_run("--set", "steps=12", "--set", "hook.name=byteps", "--set", "hook.byteps_compressor_type=topk",
                         "--set", "hook.byteps_compressor_k=0.01")
        out = ct.cli_json("predict", run, "--network", "1gbit", "--nodes", 2)["runs"][0]
        uses = [c for b in out["profile"]["buckets"] for c in b["collectives"]] + out["profile"]["step_collectives"]
        self.assertEqual({c["kind"] for c in uses}, {"pushpull"})
        config = ct.cli_json("show", run)["config"]
        sizes = ct.mlp_parameter_sizes(config)
        pushed = sum(ct.byteps_pushed_bytes(lambda m: ct.byteps_payload_bytes("topk", 0.01, m), n)
                     for n in sizes.values())
        self.assertAlmostEqual(sum(c["bytes"] / c["calls"] for c in uses), 2 * pushed, delta=1)
        b, a = 1e9 / 8, 50e-6
        expected = sum(c["calls"] * (2 * a + c["bytes"] / c["calls"] / b) for c in uses)
        self.assertAlmostEqual(out["predictions"][0]["communication_s"], expected, delta=1e-9 + 1e-9 * expected)

    def test_recommendation_depends_on_the_network_and_exports_for_pytorch(self):
        baseline = stored_run("--set", "steps=40", "--name", "allreduce")
        fp16 = stored_run("--set", "steps=40", "--set", "hook.name=fp16_compress", "--name", "fp16")
        slow = ct.cli_json("recommend", baseline, fp16, "--network", "100mbit")
        self.assertEqual(slow["chosen_run"], fp16)
        self.assertTrue(slow["verdict"].startswith("use fp16"), slow["verdict"])
        # Two ranks on NVLink: halving 5 MB saves too little to tell apart from the model's error.
        fast = ct.cli_json("recommend", baseline, fp16, "--nodes", "1", "--gpus-per-node", "2")
        self.assertIsNone(fast["chosen_run"])
        self.assertTrue(fast["verdict"].startswith("keep allreduce"), fast["verdict"])
        with tempfile.TemporaryDirectory() as d:
            proc = ct.cli("recommend", baseline, fp16, "--network", "100mbit", "--export", d)
            self.assertIn("use fp16", proc.stdout)
            self.assertEqual(sorted(os.listdir(d)), ["commtune_config.json", "use_hook.py"])
            script = textwrap.dedent(f"""
                import os, sys, torch, torch.distributed as dist
                sys.path.insert(0, {d!r})
                from use_hook import register
                dist.init_process_group("gloo", init_method="file://" + {os.path.join(d, "store")!r}, rank=0,
                                        world_size=1)
                model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
                register(model)
                x = torch.randn(16, 8)
                model(x).square().sum().backward()
                expected = (2 * (x @ model.module.weight.detach().T + model.module.bias.detach())).T @ x
                assert torch.allclose(model.module.weight.grad, expected.half().float(), rtol=1e-3, atol=1e-3)
                print(model._get_ddp_logging_data().get("comm_hook"), flush=True)
                # PyTorch (1.13, 2.11 too) sometimes aborts while tearing Gloo down ("terminate called without an active
                # exception"), after everything checked here: leave without the teardown.
                os._exit(0)
            """)
            out = subprocess.run([ct.ORACLE_PYTHON, "-c", script], capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("fp16_compress_hook", out.stdout)

    def test_the_tolerance_excludes_worse_losses(self):
        # A compressor that hurts the loss at the same settings: randomk keeping 0.1% without error feedback.
        baseline = stored_run("--set", "steps=30")
        worse = stored_run("--set", "steps=30", "--set", "hook.name=byteps", "--set", "hook.byteps_compressor_type=randomk",
                           "--set", "hook.byteps_compressor_k=0.001")
        r = ct.cli_json("recommend", baseline, worse, "--network", "100mbit", "--tolerance", "0.01")
        self.assertIsNone(r["chosen_run"])
        excluded = {c["run_id"]: c.get("excluded", "") for c in r["candidates"]}
        self.assertIn("beyond 1.00%", excluded[worse])


class TargetCompute(unittest.TestCase):
    """Predictions for another machine: compute scaled, given, or taken from a run recorded there;
    communication stays the profiled run's, and every prediction names the compute it assumed."""

    def setUp(self):
        ct.fresh_store()

    def test_the_target_compute_replaces_the_measured_one_and_is_named(self):
        baseline = stored_run("--set", "steps=30", "--name", "allreduce")
        fp16 = stored_run("--set", "steps=30", "--set", "hook.name=fp16_compress", "--name", "fp16")
        on_target = stored_run("--set", "steps=30", "--name", "recorded on the target")

        def predict(*args):
            out = ct.cli_json("predict", baseline, fp16, "--network", "1gbit", *args)
            return out, {r["run_id"]: (r["profile"], r["predictions"][0]) for r in out["runs"]}

        def compute_s(profile):
            return profile["data_s"] + profile["forward_s"] + profile["backward_s"] + profile["optimizer_s"]

        measured, here = predict()
        self.assertIn("this machine's, pooled over the 2 runs", measured["compute"])
        self.assertIn("this machine's", ct.cli("predict", baseline).stdout)

        scaled, there = predict("--compute-scale", "0.1")
        self.assertEqual(scaled["compute"], "compute: this machine's, pooled over the runs of each model, x 0.1")
        for run in (baseline, fp16):
            self.assertAlmostEqual(there[run][1]["compute_s"], 0.1 * here[run][1]["compute_s"], delta=1e-12)
            self.assertAlmostEqual(there[run][1]["compute_s"], compute_s(there[run][0]), delta=1e-12)
            # The bytes and calls are the run's: the link's time does not change.
            self.assertAlmostEqual(there[run][1]["communication_s"], here[run][1]["communication_s"], delta=1e-12)

        given, there = predict("--compute-ms", "3,6")
        self.assertEqual(given["compute"], "compute: forward 3 ms, backward 6 ms per step (given)")
        for run in (baseline, fp16):
            self.assertAlmostEqual(there[run][0]["forward_s"], 0.003)
            self.assertAlmostEqual(there[run][0]["backward_s"], 0.006)
            self.assertLessEqual(max(b["ready_s"] for b in there[run][0]["buckets"]), 0.006 + 1e-12)

        target_profile = ct.cli_json("predict", on_target)["runs"][0]["profile"]
        from_run, there = predict("--compute-from", on_target)
        self.assertIn(f"run {on_target}'s", from_run["compute"])
        for key in ("data_s", "forward_s", "backward_s", "optimizer_s"):
            self.assertAlmostEqual(there[fp16][0][key], target_profile[key], delta=1e-12)

        # A target that computes 100x faster leaves more of the step to the link: compression pays more.
        def speedup(*args):
            r = ct.cli_json("recommend", baseline, fp16, "--network", "1gbit", *args)
            return r, next(c["speedup"] for c in r["candidates"] if c["run_id"] == fp16)

        _, speedup_here = speedup()
        fast, speedup_fast = speedup("--compute-scale", "0.01")
        self.assertGreater(speedup_fast, speedup_here)
        self.assertEqual(fast["compute"], "compute: this machine's, pooled over the runs of each model, x 0.01")
        self.assertIn("x 0.01", fast["verdict"])
        self.assertIn("x 0.01", ct.cli("recommend", baseline, fp16, "--network", "1gbit",
                                        "--compute-scale", "0.01").stdout.splitlines()[0])

    def test_bad_compute_options_get_one_clear_line(self):
        run = stored_run("--set", "steps=8")
        for args, words in ((["--compute-scale", "0"], "above 0"), (["--compute-ms", "3"], "--compute-ms"),
                            (["--compute-ms", "3,-1"], "above 0"),
                            (["--compute-scale", "2", "--compute-ms", "1,2"], "excludes"),
                            (["--compute-from", "999"], "no run 999")):
            with self.subTest(args=args):
                proc = ct.cli("predict", run, *args, check=False)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(words, proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)


def powersgd_sweep(ranks):
    """Sweep 1: PowerSGD at these ranks and its allreduce baseline, 2 ranks, 16 steps."""
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "sweep.json")
        with open(spec, "w") as f:
            json.dump({"base": {"world_size": 2, "steps": 16, "model": {"hidden": 64}, "data": {"features": 32},
                                "hook": {"name": "powersgd", "start_powerSGD_iter": 2}},
                       "axes": {"hook.matrix_approximation_rank": ranks}}, f)
        ct.cli("sweep", "--spec", spec)


class StoredProfiles(unittest.TestCase):
    """A run stores its steady steps' profile as it ends (runs.samples, docs/store.md), and predictions read it
    instead of the run's step rows: the same figures, bit for bit, either way."""

    def setUp(self):
        ct.fresh_store()

    def test_predictions_from_stored_profiles_are_those_from_the_steps(self):
        powersgd_sweep([1, 2])
        runs = ct.query("SELECT id, status, length(samples) FROM runs ORDER BY id")
        self.assertEqual(len(runs), 3)  # the baseline and two trials
        for run_id, status, size in runs:
            self.assertEqual(status, "succeeded", run_id)
            self.assertGreater(size or 0, 100, f"run {run_id} stored no profile")
        commands = [("recommend", "--sweep", "1", "--network", "1gbit"), ("predict", "--sweep", "1")]
        stored = [ct.cli("--db", ct.store(), *c, "--json").stdout for c in commands]
        with tempfile.TemporaryDirectory() as d:
            steps_only = os.path.join(d, "runs.db")
            subprocess.run(["sqlite3", ct.store(), f".backup {steps_only}"], check=True)
            subprocess.run(["sqlite3", steps_only, "UPDATE runs SET samples = NULL"], check=True)
            from_steps = [ct.cli("--db", steps_only, *c, "--json").stdout for c in commands]
            # A profile that does not decode (a damaged or foreign store) is none: the steps answer.
            subprocess.run(["sqlite3", steps_only, "UPDATE runs SET samples = x'43545350ffffffff'"], check=True)
            damaged = [ct.cli("--db", steps_only, *c, "--json").stdout for c in commands]
        for command, a, b, c in zip(commands, stored, from_steps, damaged):
            self.assertEqual(a, b, command[0])
            self.assertEqual(a, c, command[0])

    def test_intervals_are_drawn_for_the_fastest_candidates_and_the_one_judged(self):
        powersgd_sweep([1, 2, 4])
        everything = ct.cli_json("recommend", "--sweep", "1", "--network", "100mbit")
        self.assertTrue(all(c["step_s"]["low"] is not None for c in everything["candidates"]))
        judged = [c for c in everything["candidates"] if not c["baseline"] and "excluded" not in c]
        judged = max(judged, key=lambda c: c["speedup"])["run_id"] if judged else None
        one = ct.cli_json("recommend", "--sweep", "1", "--network", "100mbit", "--intervals", "1")
        for position, (a, b) in enumerate(zip(everything["candidates"], one["candidates"])):
            self.assertEqual(a["run_id"], b["run_id"])  # the order is the points'
            self.assertEqual(a["step_s"]["value"], b["step_s"]["value"])
            drawn = position == 0 or b["run_id"] == judged
            self.assertEqual(b["step_s"]["low"] is not None, drawn, b)
            if drawn:
                self.assertEqual(a["step_s"], b["step_s"])
                self.assertEqual(a["speedup_interval"], b["speedup_interval"])
        self.assertEqual(everything["verdict"], one["verdict"])
        self.assertEqual(everything["chosen_run"], one["chosen_run"])
        text = ct.cli("recommend", "--sweep", "1", "--network", "100mbit", "--intervals", "1").stdout
        self.assertIn("95% intervals for the 1 fastest predicted and the one judged", text)


class PublishedNumbers(unittest.TestCase):
    """bench/netmodel_validation.py against BytePS's compression RFC (docs/network-model.md): commtune's
    ResNet-18 and hooks measured here, predicted for 4 nodes x 8 V100s. Checked: the model's size, and the
    shares of exposed communication at 100 Mbit/s, where the link sets the pace, as the docs' table states."""

    def test_the_documented_comparison_is_what_the_model_computes(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("netmodel_validation",
                                                      os.path.join(ct.REPO, "bench", "netmodel_validation.py"))
        validation = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(validation)
        result = validation.validate(steps=6, batch=4)
        self.assertAlmostEqual(result["parameters"] / 1e6, 11.22, delta=0.01)  # ResNet-18, 100 classes
        self.assertIn("forward 10 ms, backward 20 ms", result["compute"])
        with open(os.path.join(ct.REPO, "docs", "network-model.md")) as f:
            documented = {}
            for line in f:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) == 5 and cells[0] in ("100 Mbit/s", "25 Gbit/s"):
                    documented[(cells[0], cells[1])] = (float(cells[2].replace("−", "-")),
                                                        float(cells[3].replace("−", "-")))
        rows = {(r["network"], r["hook"]): r for r in result["rows"]}
        for hook in ("onebit", "randomk"):
            published, predicted = documented[("100 Mbit/s", hook)]
            row = rows[("100mbit", hook)]
            self.assertAlmostEqual(row["published_r"], published, delta=5e-4)
            self.assertAlmostEqual(row["predicted_r"], predicted, delta=0.02, msg=row)
        # BytePS's onebit: a worker's push and pull, 2 x 1/32 of the gradient, against the ring allreduce's
        # 2 x 31/32: 1/31.
        self.assertAlmostEqual(rows[("100mbit", "onebit")]["predicted_r"], 1 / 31, delta=0.01)


if __name__ == "__main__":
    unittest.main()

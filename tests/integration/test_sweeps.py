"""Sweeps from the CLI on a real store: a PowerSGD grid with its allreduce
baseline, successive halving that stops the worst trials early, a failed
trial that does not stop the sweep, and a launcher killed mid-sweep that
resumes without losing a metric or running a finished trial again."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

SMALL = ["--set", "model.hidden=128", "--set", "data.features=64", "--set", "world_size=2"]


def trials(sweep_id):
    return ct.cli_json("show", "--sweep", sweep_id)["trials"]


def steps_stored(run_id):
    """(rank, step) pairs stored for a run, and how many rows there are."""
    rows = ct.query("SELECT rank, step FROM step_metrics WHERE run_id = ?", (run_id,))
    return set(rows), len(rows)


def wait_while_training(test, trial, rows):
    """Waits until trial number `trial` has stored more than `rows` step rows."""
    def training():
        try:  # the sweep creates the store: until its schema is committed, there is nothing to read
            stored = ct.query("SELECT count(m.step) FROM runs r JOIN step_metrics m ON m.run_id = r.id "
                              "WHERE r.trial = ? GROUP BY r.id", (trial,))
        except sqlite3.OperationalError:  # no file yet, or no tables yet
            return False
        return bool(stored) and stored[0][0] > rows

    test.assertIsNotNone(ct.wait_for(training, 120))


def kill_while_training(test, proc, trial, rows):
    """Kills the sweep process `proc` once trial number `trial` has stored more than `rows` step rows; waits
    until its workers are gone."""
    wait_while_training(test, trial, rows)
    workers = ct.children_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    test.assertIsNotNone(ct.wait_for(lambda: not any(ct.is_running(p) for p in workers), 15))


class Sweeps(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def test_axes_take_ranges_on_the_command_line_and_tables_show_readable_values(self):
        plan = ct.cli("sweep", *SMALL, "--no-baseline", "--axis", "optimizer.lr=0.02..0.2:4:log", "--plan").stdout
        labels = [line.split(None, 2)[2] for line in plan.splitlines()[1:] if "lr=" in line]  # trial, steps, label
        self.assertEqual(labels, ["lr=0.02", "lr=0.04309", "lr=0.09283", "lr=0.2"])
        for bad in ("optimizer.lr=0.02..", "optimizer.lr=0.02..0.2:x", "optimizer.lr=a..0.2"):
            proc = ct.cli("sweep", *SMALL, "--axis", bad, "--plan", check=False)
            self.assertEqual(proc.returncode, 2, bad)
            self.assertIn("MIN..MAX[:POINTS][:log]", proc.stderr)
        # An integer range with more points than integers: refused up front (it crashed planning with
        # "vector::_M_range_check"), naming the field and how many points it can take.
        proc = ct.cli("sweep", *SMALL, "--set", "hook.name=powersgd", "--set", "hook.start_powerSGD_iter=2",
                      "--axis", "hook.matrix_approximation_rank=1..4:10", "--plan", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("axes.hook.matrix_approximation_rank.points", proc.stderr)
        self.assertIn("round to 4 integers", proc.stderr)
        # The same where an axis selects the hook that owns the parameter.
        proc = ct.cli("sweep", *SMALL, "--axis", "hook.name=powersgd", "--axis", "hook.start_powerSGD_iter=2",
                      "--axis", "hook.matrix_approximation_rank=1..4:10", "--plan", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("axes.hook.matrix_approximation_rank.points", proc.stderr)
        # A value computed on a log scale is stored with every digit and shown with six.
        ct.cli("sweep", *SMALL, "--no-baseline", "--set", "steps=4", "--axis", "optimizer.lr=0.1..1:3:log")
        table = ct.cli("compare", "--sweep", ct.cli_json("list", "--sweeps")[0]["id"]).stdout
        self.assertIn(" 0.316228 ", table)
        self.assertNotIn("0.31622776601", table)

    def test_list_search_takes_the_runs_pages_conditions(self):
        # The query language of the Runs page's search box: conditions on parameters and figures, and free text.
        ct.cli("sweep", *SMALL, "--no-baseline", "--set", "steps=6", "--axis", "optimizer.lr=0.01,0.1,0.5")
        shown = {r["id"]: ct.cli_json("show", r["id"]) for r in ct.cli_json("list")}
        lr = {i: s["config"]["optimizer"]["lr"] for i, s in shown.items()}
        tail = {i: s["digest"]["tail_loss"] for i, s in shown.items()}
        self.assertEqual(sorted(lr.values()), [0.01, 0.1, 0.5])

        def found(query):
            return sorted(r["id"] for r in ct.cli_json("list", "--search", query))

        self.assertEqual(found("optimizer.lr >= 0.1"), sorted(i for i in lr if lr[i] >= 0.1))
        self.assertEqual(found("optimizer.lr = 0.1, steps = 6"), [i for i in lr if lr[i] == 0.1])
        middle = sorted(tail.values())[1]
        self.assertEqual(found(f"tail_loss < {middle!r}"), sorted(i for i in tail if tail[i] < middle))
        self.assertEqual(len(found(f"tail_loss < {middle!r}")), 1)
        self.assertEqual(found("steps > 6"), [])
        # A name it does not know is said so, with the names it does.
        proc = ct.cli("list", "--search", "optimiser.lr > 0.1", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no figure or parameter 'optimiser.lr'", proc.stderr)

    def test_each_trial_counts_its_wall_time_from_its_own_start(self):
        # The dashboard's "relative time" axis lines trials up: a later trial's clock does not go on from the
        # sweep's start (its curve would be drawn further right, by the time the trials before it took).
        ct.cli("sweep", *SMALL, "--no-baseline", "--set", "steps=6", "--axis", "optimizer.lr=0.01,0.1,0.5")
        runs = sorted(ct.cli_json("list"), key=lambda r: r["started_at"])
        self.assertEqual(len(runs), 3)
        # A trial's clock starts after the store marks it started and its last step arrives before it is
        # marked finished: every wall time lies within those (the slack: a wall clock against a steady one).
        for r in runs:
            first, last = ct.query("SELECT min(wall_s), max(wall_s) FROM step_metrics WHERE run_id = ?", (r["id"],))[0]
            self.assertGreater(first, 0)
            self.assertLessEqual(last, r["finished_at"] - r["started_at"] + 0.05, r)

    def test_powersgd_grid_with_baseline(self):
        proc = ct.cli("sweep", "--name", "grid", *SMALL, "--set", "steps=24", "--set", "hook.name=powersgd",
                      "--axis", "hook.matrix_approximation_rank=1,2,4", "--axis", "hook.start_powerSGD_iter=2,10")
        self.assertIn("7 succeeded", proc.stderr)
        sweep_id = ct.cli_json("list", "--sweeps")[0]["id"]
        compared = ct.cli_json("compare", "--sweep", sweep_id)
        runs = compared["runs"]
        self.assertEqual(len(runs), 7)
        self.assertTrue(all(r["status"] == "succeeded" and r["steps_completed"] == 24 for r in runs))
        baseline = [r for r in runs if r["baseline"]]
        self.assertEqual([r["hook"] for r in baseline], ["allreduce"])
        self.assertEqual(compared["baseline_run"], baseline[0]["id"])
        grid = sorted((r["params"]["hook.matrix_approximation_rank"], r["params"]["hook.start_powerSGD_iter"])
                      for r in runs if not r["baseline"])
        self.assertEqual(grid, [(1, 2), (1, 10), (2, 2), (2, 10), (4, 2), (4, 10)])
        # PowerSGD compresses once it starts: fewer bytes than the baseline, more for a higher rank.
        wire = {(r["params"]["hook.matrix_approximation_rank"], r["params"]["hook.start_powerSGD_iter"]):
                r["digest"]["wire_mb_per_step"] for r in runs if not r["baseline"]}
        self.assertLess(wire[(1, 2)], wire[(2, 2)])
        self.assertLess(wire[(2, 2)], wire[(4, 2)])
        self.assertLess(wire[(4, 2)], baseline[0]["digest"]["wire_mb_per_step"] / 4)
        # The table a person reads names every trial.
        table = ct.cli("compare", "--sweep", sweep_id).stdout
        self.assertEqual(table.count("matrix_approximation_rank="), 6)
        self.assertIn("baseline", table)

    def test_successive_halving_stops_the_worst_trials_early(self):
        # Learning rates from useless to good, in no order: rungs at 6 and 18 steps, then 54.
        ct.cli("sweep", *SMALL, "--set", "steps=54", "--no-baseline", "--early-stop", "6:3",
               "--axis", "optimizer.lr=0.03,0.0003,0.3,0.001,0.1,0.0001,0.01,0.5,0.003")
        sweep_id = ct.cli_json("list", "--sweeps")[0]["id"]
        runs = ct.cli_json("list", "--sweep", sweep_id)
        for r in runs:
            self.assertIn(r["steps_completed"], (6, 18, 54))
            self.assertEqual(r["status"], "succeeded" if r["steps_completed"] == 54 else "stopped", r)
        reached = [sum(r["steps_completed"] >= s for r in runs) for s in (6, 18, 54)]
        self.assertEqual(reached[0], 9)
        self.assertLess(reached[1], reached[0])
        self.assertLess(reached[2], reached[1])
        self.assertLessEqual(reached[2], 3)
        # Ranked by the loss at the first rung: the best goes on, the worst stops there.
        at_first_rung = sorted((ct.query("SELECT avg(loss) FROM step_metrics WHERE run_id = ? AND step = 5",
                                         (r["id"],))[0][0], r["steps_completed"]) for r in runs)
        self.assertGreater(at_first_rung[0][1], 6)
        self.assertEqual([steps for _, steps in at_first_rung[-3:]], [6, 6, 6])

    def test_a_failed_trial_is_recorded_and_the_sweep_goes_on(self):
        proc = ct.cli("sweep", *SMALL, "--set", "steps=10", "--set", "debug.fail_at_step=4", "--no-baseline",
                      "--axis", "debug.fail_rank=-1,1", "--axis", "optimizer.lr=0.01,0.1", check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        runs = ct.cli_json("list")
        statuses = sorted((r["name"], r["status"]) for r in runs)
        self.assertEqual([s for _, s in statuses].count("failed"), 2, statuses)
        self.assertEqual([s for _, s in statuses].count("succeeded"), 2, statuses)
        for r in runs:
            if r["status"] == "failed":
                self.assertIn("rank 1", r["reason"])

    def test_two_trials_at_once_on_disjoint_cores(self):
        ct.cli("sweep", "--set", "world_size=1", "--set", "steps=300", "--no-baseline", "--parallel", "2",
               "--axis", "optimizer.lr=0.01,0.02,0.03,0.04")
        runs = ct.cli_json("list")
        self.assertEqual([r["status"] for r in runs], ["succeeded"] * 4)
        spans = sorted((r["started_at"], r["finished_at"]) for r in runs)
        overlapping = sum(1 for a, b in zip(spans, spans[1:]) if b[0] < a[1])
        self.assertGreaterEqual(overlapping, 1, spans)
        # Each trial had one core to itself: one thread per rank.
        threads = {ct.cli_json("show", r["id"])["summary"]["threads_per_rank"] for r in runs}
        self.assertEqual(threads, {1})

    def test_random_search_is_planned_from_its_seed(self):
        args = ["sweep", "--strategy", "random", "--trials", "5", "--seed", "7", "--no-baseline", "--plan",
                "--set", "hook.name=powersgd", "--set", "hook.start_powerSGD_iter=2",
                "--axis", "hook.matrix_approximation_rank=1,2,4,8"]
        spec = {"axes": {"optimizer.lr": {"min": 0.001, "max": 0.1, "log": True}}}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            import json
            json.dump(spec, f)
            f.flush()
            first = ct.cli(*args, "--spec", f.name).stdout
            again = ct.cli(*args, "--spec", f.name).stdout
            other = ct.cli(*[a if a != "7" else "8" for a in args], "--spec", f.name).stdout
        self.assertEqual(first, again)
        self.assertNotEqual(first, other)
        labels = [line.split(None, 2)[2] for line in first.splitlines()[1:]]  # trial, steps, label
        self.assertEqual(len(set(labels)), 5, first)
        for label in labels:
            values = dict(item.split("=") for item in label.split())
            self.assertIn(values["matrix_approximation_rank"], {"1", "2", "4", "8"})
            self.assertTrue(0.001 <= float(values["lr"]) <= 0.1, label)
        self.assertEqual(ct.cli_json("list", "--sweeps"), [])

    def test_a_bad_axis_names_the_field_and_stores_nothing(self):
        proc = ct.cli("sweep", "--axis", "hook.matrix_approximation_rank=0,2", "--set", "hook.name=powersgd",
                      check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("axes.hook.matrix_approximation_rank", proc.stderr)
        proc = ct.cli("sweep", "--axis", "hook.no_such_knob=1,2", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("hook.no_such_knob", proc.stderr)
        self.assertEqual(ct.cli_json("list", "--sweeps"), [])

    def test_a_killed_sweep_resumes_where_it_stopped(self):
        with tempfile.TemporaryDirectory() as work:
            args = [ct.CLI, "sweep", *SMALL, "--set", "steps=80", "--no-baseline", "--checkpoint-every", "10",
                    "--work-dir", work, "--axis", "optimizer.lr=0.01,0.02,0.03,0.04"]
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            kill_while_training(self, proc, trial=1, rows=2 * 35)
            before = {r["id"]: r for r in ct.cli_json("list")}
            kept = {i: steps_stored(i)[0] for i in before}
            self.assertEqual([r["status"] for r in before.values()], ["succeeded", "interrupted", "pending", "pending"])

            resumed = ct.cli("sweep", "--resume", ct.cli_json("list", "--sweeps")[0]["id"], "--work-dir", work)
            self.assertIn("continues from step", resumed.stderr)
            after = {r["id"]: r for r in ct.cli_json("list")}
            self.assertTrue(all(r["status"] == "succeeded" and r["steps_completed"] == 80 for r in after.values()))
            first = min(before)
            self.assertEqual(after[first]["finished_at"], before[first]["finished_at"], "a finished trial ran again")
            self.assertNotIn(before[first]["name"] + ":", resumed.stderr)
            for run_id in after:
                stored, rows = steps_stored(run_id)
                self.assertTrue(kept[run_id] <= stored, f"run {run_id} lost metrics")
                self.assertEqual((len(stored), rows), (2 * 80, 2 * 80), f"run {run_id}")

    def test_stop_sweep_ends_a_sweep_from_another_terminal(self):
        # What the desktop app's Stop all files for a sweep another window runs: the sweep ends, cancelled, and
        # does not go on with its next trial once the running ones stop.
        with tempfile.TemporaryDirectory() as work:
            args = [ct.CLI, "sweep", *SMALL, "--set", "steps=1000000", "--no-baseline", "--work-dir", work,
                    "--axis", "optimizer.lr=0.01,0.02"]
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_while_training(self, trial=0, rows=10)
                workers = ct.children_of(proc.pid)
                sweep_id = ct.cli_json("list", "--sweeps")[0]["id"]
                stop = ct.cli("stop", "--sweep", sweep_id, "--wait", 60)
                self.assertIn(f"sweep {sweep_id} cancelled", stop.stderr)
                self.assertEqual(proc.wait(timeout=30), 130)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.assertIsNotNone(ct.wait_for(lambda: not any(ct.is_running(p) for p in workers), 15))
            self.assertEqual([r["status"] for r in ct.cli_json("list")], ["cancelled", "pending"])
            self.assertEqual(os.listdir(f"{ct.store()}.stop"), [])
            again = ct.cli("stop", "--sweep", sweep_id, check=False)
            self.assertEqual(again.returncode, 1)
            self.assertIn(f"sweep {sweep_id} is not running (cancelled)", again.stderr)

    def test_two_resumes_at_once_run_the_sweep_once(self):
        """Two `sweep --resume` started at the same instant: one runs the rest of the sweep, the other is
        refused before it runs anything, so no two run the same trials into the same rows."""
        with tempfile.TemporaryDirectory() as work:
            args = [ct.CLI, "sweep", *SMALL, "--set", "steps=30", "--no-baseline", "--work-dir", work,
                    "--axis", "optimizer.lr=0.01,0.02,0.03"]
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            kill_while_training(self, proc, trial=0, rows=10)
            sweep_id = str(ct.cli_json("list", "--sweeps")[0]["id"])
            resumes = [subprocess.Popen([ct.CLI, "sweep", "--resume", sweep_id, "--work-dir", work],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                       for _ in range(2)]
            ended = [(p.wait(timeout=300), p.stderr.read()) for p in resumes]
            for p in resumes:
                p.stdout.close()
                p.stderr.close()
            codes = sorted(code for code, _ in ended)
            self.assertEqual(codes[0], 0, ended)
            self.assertNotEqual(codes[1], 0, ended)
            refused = [err for code, err in ended if code != 0][0]
            self.assertIn(f"sweep {sweep_id} is running in another process", refused)
            for run in ct.cli_json("list"):
                self.assertEqual(run["status"], "succeeded")
                stored, rows = steps_stored(run["id"])
                self.assertEqual((len(stored), rows), (2 * 30, 2 * 30), f"run {run['id']}")

    def test_a_trial_stopped_as_it_ended_is_finished_by_a_resume(self):
        # A stop that comes as a trial takes its last step leaves the trial with every step stored and no end:
        # cancelled, as a stopped sweep's trials are (seen in CI on a SLURM sweep). A resume runs its last steps
        # again from a checkpoint before them, and it ends, not left cancelled under a sweep that says succeeded.
        with tempfile.TemporaryDirectory() as work:
            ct.cli("sweep", *SMALL, "--set", "steps=40", "--no-baseline", "--checkpoint-every", "10",
                   "--work-dir", work, "--axis", "optimizer.lr=0.01,0.02")
            sweep_id = ct.cli_json("list", "--sweeps")[0]["id"]
            runs = ct.cli_json("list")
            caught = runs[0]["id"]
            losses_before = ct.stored_losses(caught)
            with sqlite3.connect(ct.store()) as db:  # what the stop left behind
                db.execute("UPDATE runs SET status = 'cancelled', reason = 'cancelled' WHERE id = ?", (caught,))
                db.execute("UPDATE sweeps SET status = 'cancelled' WHERE id = ?", (sweep_id,))
            resumed = ct.cli("sweep", "--resume", sweep_id, "--work-dir", work)
            # Ended, the trial kept only its checkpoint at step 40, which a segment to step 40 cannot start from.
            self.assertIn(f"run {caught}] lr=0.01: starts to step 40", resumed.stderr)
            self.assertNotIn("lr=0.02", resumed.stderr)
            after = {r["id"]: r for r in ct.cli_json("list")}
            self.assertEqual({i: (r["status"], r["steps_completed"]) for i, r in after.items()},
                             {r["id"]: ("succeeded", 40) for r in runs})
            self.assertEqual(after[runs[1]["id"]]["finished_at"], runs[1]["finished_at"], "a finished trial ran again")
            self.assertEqual(steps_stored(caught)[1], 2 * 40)
            self.assertEqual(ct.stored_losses(caught), losses_before)  # the last steps again, bit for bit


class TpeSweeps(unittest.TestCase):
    """Trials drawn by TPE as the sweep runs: stored with the drawn values, the
    same again from the same seed, resumable, and usable with successive halving."""

    def setUp(self):
        ct.fresh_store()

    def tpe_spec(self, directory, **options):
        spec = {"axes": {"optimizer.lr": {"min": 0.0001, "max": 0.5, "log": True},
                         "hook.matrix_approximation_rank": [1, 2, 4]},
                "base": {"hook": {"name": "powersgd", "start_powerSGD_iter": 2}}, "strategy": "tpe", "baseline": False,
                **options}
        path = os.path.join(directory, "tpe.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        return path

    def drawn(self):
        runs = ct.cli_json("compare", "--sweep", ct.cli_json("list", "--sweeps")[0]["id"])["runs"]
        return [(r["params"]["optimizer.lr"], r["params"]["hook.matrix_approximation_rank"])
                for r in sorted(runs, key=lambda r: r["id"])]

    def test_each_trial_is_drawn_when_it_starts_and_the_seed_repeats_the_sweep(self):
        with tempfile.TemporaryDirectory() as d:
            spec = self.tpe_spec(d, trials=5, seed=11, tpe_startup_trials=2)  # three drawn from the model
            plan = ct.cli("sweep", "--spec", spec, *SMALL, "--plan").stdout
            self.assertEqual(plan.count("made when it starts"), 5, plan)
            proc = ct.cli("sweep", "--spec", spec, *SMALL, "--set", "steps=12")
            self.assertIn("5 succeeded", proc.stderr)
            first = self.drawn()
            self.assertEqual(len(set(first)), 5, first)
            for lr, rank in first:
                self.assertTrue(0.0001 <= lr <= 0.5, lr)
                self.assertIn(rank, (1, 2, 4))
            names = [r["name"] for r in ct.cli_json("list")]
            self.assertFalse(any("made when it starts" in n for n in names), names)
            # Training is deterministic, so the model sees the same losses and draws the same trials.
            ct.fresh_store()
            ct.cli("sweep", "--spec", spec, *SMALL, "--set", "steps=12")
            self.assertEqual(self.drawn(), first)
            ct.fresh_store()
            ct.cli("sweep", "--spec", spec, *SMALL, "--set", "steps=12", "--seed", "12")
            self.assertNotEqual(self.drawn(), first)

    def test_a_killed_tpe_sweep_keeps_its_draws_and_draws_the_rest_on_resume(self):
        with tempfile.TemporaryDirectory() as work:
            spec = self.tpe_spec(work, trials=4, seed=3, tpe_startup_trials=2)
            proc = subprocess.Popen([ct.CLI, "sweep", "--spec", spec, *SMALL, "--set", "steps=60",
                                     "--checkpoint-every", "10", "--work-dir", work],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            kill_while_training(self, proc, trial=2, rows=2 * 25)
            before = ct.cli_json("list")
            self.assertEqual([r["status"] for r in before], ["succeeded", "succeeded", "interrupted", "pending"])
            self.assertIn("made when it starts", before[3]["name"])
            resumed = ct.cli("sweep", "--resume", ct.cli_json("list", "--sweeps")[0]["id"], "--work-dir", work)
            self.assertIn("continues from step", resumed.stderr)
            after = ct.cli_json("list")
            self.assertEqual([r["status"] for r in after], ["succeeded"] * 4)
            self.assertEqual([r["name"] for r in after[:3]], [r["name"] for r in before[:3]])
            self.assertEqual(after[0]["finished_at"], before[0]["finished_at"], "a finished trial ran again")
            self.assertNotIn("made when it starts", after[3]["name"])
            self.assertEqual(ct.query("SELECT count(*) FROM run_params WHERE run_id = ? AND name = 'optimizer.lr'",
                                      (after[3]["id"],)), [(1,)])

    def test_tpe_with_successive_halving_and_two_objectives(self):
        with tempfile.TemporaryDirectory() as d:
            spec = self.tpe_spec(d, trials=6, seed=5, tpe_startup_trials=3, objective="tail_loss,step_time",
                                 objective_network="1gbit")
            proc = ct.cli("sweep", "--spec", spec, *SMALL, "--set", "steps=36", "--early-stop", "4:3")
            runs = ct.cli_json("list")
            self.assertEqual(len(runs), 6, proc.stderr)
            for r in runs:
                self.assertIn(r["steps_completed"], (4, 12, 36))
                self.assertEqual(r["status"], "succeeded" if r["steps_completed"] == 36 else "stopped", r)
            self.assertLess(sum(r["steps_completed"] == 36 for r in runs), 6)
            self.assertEqual(len(set(self.drawn())), 6)
            bad = ct.cli("sweep", "--spec", self.tpe_spec(d, objective_network="5gbit"), *SMALL, check=False)
            self.assertEqual(bad.returncode, 2, bad.stderr)
            self.assertIn("objective_network", bad.stderr)
            self.assertIn("100mbit", bad.stderr)


if __name__ == "__main__":
    unittest.main()

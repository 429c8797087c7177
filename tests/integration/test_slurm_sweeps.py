"""Sweeps whose trials are SLURM jobs, against a real SLURM on this machine
(scripts/slurm-local.sh: munge, slurmctld and slurmd on 127.0.0.1): each
trial is submitted with sbatch, its ranks write event files to the sweep's
folder, and the sweeping process streams them into the store while they
run. The trials' losses are the same trials' run here, bit for bit; a job
that SLURM kills fails its trial with SLURM's reason; a sweeper killed with
SIGKILL is resumed without submitting a job twice; Stop cancels the jobs."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

# One thread per rank: the two "nodes" share this machine's cores, each would take them all.
BASE = {"steps": 30, "device": "cpu", "threads": 1, "model": {"hidden": 64}, "data": {"features": 32}}
LRS = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06]


def spec(folder, backend="slurm", **extra):
    s = {"name": f"lr-{backend}", "backend": backend, "baseline": False, "parallel": 2, "base": dict(BASE),
         "axes": {"optimizer.lr": LRS}}
    if backend == "slurm":
        # Two "nodes" of one rank each: two slurmd on this machine (scripts/slurm-local.sh).
        s["slurm"] = {"nodes": 2, "ranks_per_node": 1, "folder": folder, "poll_s": 0.2, "quiet_limit_s": 60}
    else:
        s["base"]["world_size"] = 2
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(s.get(key), dict):
            s[key] = {**s[key], **value}
        else:
            s[key] = value
    path = os.path.join(folder, f"{backend}-spec.json")
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def sweep_cli(env, *args):
    return subprocess.run([ct.CLI, "sweep", *map(str, args)], env=env, capture_output=True, text=True, timeout=600)


def trial_runs(sweep_id):
    """trial -> (run id, status, reason)."""
    return {t: (i, s, r) for (t, i, s, r) in
            ct.query("SELECT trial, id, status, reason FROM runs WHERE sweep_id = ?", (sweep_id,))}


def jobs_of(run_id):
    """The SLURM job ids the sweep submitted for a run, in order."""
    return [json.loads(body)["job_id"] for (body,) in
            ct.query("SELECT body FROM run_events WHERE run_id = ? AND kind = 'slurm_job' ORDER BY id", (run_id,))]


def queued(env):
    """Job ids SLURM has queued or running."""
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True).stdout
    return set(out.split())


class SlurmSpecErrors(unittest.TestCase):
    """A SLURM section that cannot work is refused before anything is stored or submitted, naming the field."""

    def refused(self, folder, **extra):
        proc = ct.cli("sweep", "--plan", "--spec", spec(folder, **extra), check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        return proc.stderr

    def test_each_mistake_names_its_field(self):
        with tempfile.TemporaryDirectory() as folder:
            self.assertIn("base.world_size", self.refused(folder, base={**BASE, "world_size": 3}))
            self.assertIn("slurm.sbatch[1]", self.refused(folder, slurm={"sbatch": ["--account=a", "--comment=a b"]}))
            self.assertIn("slurm.partition", self.refused(folder, slurm={"partition": "gpu; rm -rf /"}))
            self.assertIn("slurm.nodes", self.refused(folder, slurm={"nodes": 0}))
            self.assertIn("slurm.folder", self.refused(folder, slurm={"folder": folder + "/a\n#SBATCH --x"}))
            self.assertIn("slurm.quiet_limit_s", self.refused(folder, slurm={"quiet_limit_s": 1e300}))
            self.assertIn("slurm.no_such_key", self.refused(folder, slurm={"no_such_key": 1}))
            local = spec(folder, backend="local", slurm={"nodes": 2})
            proc = ct.cli("sweep", "--plan", "--spec", local, check=False)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("slurm", proc.stderr)
            # The plan of a good one: six trials of nodes x ranks_per_node ranks.
            plan = ct.cli("sweep", "--plan", "--spec", spec(folder, slurm={"nodes": 4, "ranks_per_node": 8}))
            self.assertEqual(len([line for line in plan.stdout.splitlines() if "lr=" in line]), len(LRS))


def fake_slurm(folder, output):
    """A bin folder whose sbatch makes the job's output file with the shell line `output` (in the folder
    sbatch runs in, where --output points) and answers job 4242; scontrol says it FAILED."""
    bin_dir = os.path.join(folder, "fake-bin")
    os.mkdir(bin_dir)
    tools = {"sbatch": f"{output}\necho 4242", "squeue": "exit 0", "scancel": "exit 0",
             "scontrol": "echo 'JobId=4242 JobName=x JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0'"}
    for name, body in tools.items():
        path = os.path.join(bin_dir, name)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\n{body}\n")
        os.chmod(path, 0o755)
    return bin_dir


class SlurmOutputFiles(unittest.TestCase):
    """The job's folder is the user's: whatever takes the output file's place there (a FIFO, a link to
    /dev/zero) is not read, the trial fails with SLURM's own reason, and the sweep ends. A FIFO used to
    hang the sweep in open(), past SIGINT and SIGTERM; /dev/zero was read until memory ran out."""

    def setUp(self):
        ct.fresh_store()

    def test_a_fifo_or_a_device_as_the_output_does_not_stop_the_sweep(self):
        for output in ("mkfifo slurm-4242.out", "ln -s /dev/zero slurm-4242.out"):
            with self.subTest(output=output), tempfile.TemporaryDirectory() as folder:
                env = dict(os.environ, COMMTUNE_DB=ct.store(),
                           PATH=fake_slurm(folder, output) + os.pathsep + os.environ["PATH"])
                proc = sweep_cli(env, "--spec", spec(folder, axes={"optimizer.lr": [0.01]}))
                self.assertEqual(proc.returncode, 1, proc.stderr)
                sweep_id = ct.query("SELECT max(id) FROM sweeps")[0][0]
                (_, status, reason), = trial_runs(sweep_id).values()
                self.assertEqual(status, "failed")
                self.assertIn("SLURM job 4242 ended FAILED (NonZeroExitCode), exit code 1:0", reason)
                self.assertNotIn("its output ends", reason)


class SlurmSweeps(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def last_sweep(self):
        return ct.query("SELECT max(id) FROM sweeps")[0][0]

    def test_every_trial_is_a_job_and_trains_as_it_does_here(self):
        with tempfile.TemporaryDirectory() as folder, ct.LocalSlurm(self, nodes=2) as slurm:
            env = dict(slurm.env, COMMTUNE_DB=ct.store())
            proc = sweep_cli(env, "--spec", spec(folder))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("6 succeeded", proc.stderr)
            remote = self.last_sweep()
            proc = sweep_cli(env, "--spec", spec(folder, backend="local"))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            local = self.last_sweep()
            remote_runs, local_runs = trial_runs(remote), trial_runs(local)
            all_jobs = []
            for trial in range(len(LRS)):
                run_id, status, _ = remote_runs[trial]
                self.assertEqual(status, "succeeded")
                jobs = jobs_of(run_id)
                self.assertEqual(len(jobs), 1, jobs)
                all_jobs += jobs
                got, expected = ct.stored_losses(run_id), ct.stored_losses(local_runs[trial][0])
                self.assertEqual(len(got), 2 * BASE["steps"])
                self.assertEqual(got, expected, f"trial {trial}")  # bit for bit: the engine is deterministic
                self.assertTrue(os.path.exists(os.path.join(folder, f"sweep-{remote}", f"run-{run_id}",
                                                            f"to-step-{BASE['steps']}", "launch.sbatch")))
            self.assertEqual(len(set(all_jobs)), len(LRS))
            self.assertEqual(queued(env), set())

    def test_killed_jobs_fail_a_killed_sweeper_resumes_and_stop_cancels(self):
        long_base = {**BASE, "steps": 4000}
        with tempfile.TemporaryDirectory() as folder, ct.LocalSlurm(self, nodes=2) as slurm:
            env = dict(slurm.env, COMMTUNE_DB=ct.store())
            spec_path = spec(folder, base=long_base, checkpoint_every=200)
            proc = subprocess.Popen([ct.CLI, "sweep", "--spec", spec_path], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            try:
                def running_trials(at_least_steps):
                    try:
                        rows = ct.query("SELECT r.trial, r.id FROM runs r WHERE r.status = 'running' AND "
                                        "(SELECT count(*) FROM step_metrics m WHERE m.run_id = r.id) > ?",
                                        (at_least_steps,))
                    except sqlite3.OperationalError:
                        return []
                    return sorted(rows)

                self.assertIsNotNone(ct.wait_for(lambda: len(running_trials(50)) == 2, 180), proc.stderr)
                sweep_id = self.last_sweep()
                (killed_trial, killed_run), (kept_trial, kept_run) = running_trials(50)
                # SLURM kills one job: its trial fails with SLURM's reason, the sweep goes on.
                killed_job = jobs_of(killed_run)[0]
                subprocess.run(["scancel", killed_job], env=env, check=True)
                self.assertIsNotNone(ct.wait_for(lambda: trial_runs(sweep_id)[killed_trial][1] == "failed", 60))
                self.assertIn(f"SLURM job {killed_job} ended CANCELLED", trial_runs(sweep_id)[killed_trial][2])
                # The sweeper dies; the jobs it submitted go on.
                kept_job = jobs_of(kept_run)[0]
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                self.assertIn(kept_job, queued(env))
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

            # Resumed, it finds the running job by its id instead of submitting it again.
            resumed = subprocess.Popen([ct.CLI, "sweep", "--resume", str(sweep_id)], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                self.assertIsNotNone(ct.wait_for(lambda: len(running_trials(50)) == 2, 180))
                self.assertEqual(jobs_of(kept_run), [kept_job])
                running_now = [run for (_, run) in running_trials(50)]
                jobs_now = [jobs_of(run)[-1] for run in running_now]
                # Stop: the sweep cancels its jobs and ends cancelled.
                resumed.send_signal(signal.SIGINT)
                out, err = resumed.communicate(timeout=120)
            finally:
                if resumed.poll() is None:
                    resumed.kill()
                    resumed.wait()
            self.assertIn("cancelled", err)
            self.assertIsNotNone(ct.wait_for(lambda: not (set(jobs_now) & queued(env)), 30), queued(env))
            # A job may reach its last step between the look at what runs and the stop (a job SLURM ran
            # on while no sweeper watched; any job, on a loaded machine): it then succeeds with every
            # step. The others end cancelled, and at least one does.
            stopped = {run: ct.query("SELECT status FROM runs WHERE id = ?", (run,))[0][0] for run in running_now}
            for run, status in stopped.items():
                if status != "cancelled":
                    self.assertEqual(status, "succeeded", stopped)
                    self.assertEqual(len(ct.query("SELECT DISTINCT step FROM step_metrics WHERE run_id = ?",
                                                  (run,))), long_base["steps"])
            self.assertIn("cancelled", stopped.values())

            # Resumed once more, every trial but the killed one ends, each job submitted once per segment start.
            done = sweep_cli(env, "--resume", sweep_id)
            self.assertEqual(done.returncode, 0, done.stderr)
            runs = trial_runs(sweep_id)
            self.assertEqual(runs[killed_trial][1], "failed")
            for trial, (run_id, status, reason) in runs.items():
                if trial != killed_trial:
                    self.assertEqual(status, "succeeded",
                                     f"{reason}; jobs {jobs_of(run_id)} (stop phase: {stopped}); the last resume "
                                     f"said:\n{done.stderr[-3000:]}")
                    self.assertEqual(len(ct.query("SELECT DISTINCT step FROM step_metrics WHERE run_id = ?",
                                                  (run_id,))), long_base["steps"])
            every_job = [job for (run_id, _, _) in runs.values() for job in jobs_of(run_id)]
            self.assertEqual(len(every_job), len(set(every_job)))  # no job id recorded twice
            self.assertEqual(queued(env), set())

    def test_successive_halving_submits_each_rung_as_it_decides(self):
        """A rung at 18 steps, then 54: every trial's first segment is a job; the promoted trial's next
        segment is another job, continuing from the checkpoint the last one left in the shared folder."""
        with tempfile.TemporaryDirectory() as folder, ct.LocalSlurm(self, nodes=2) as slurm:
            env = dict(slurm.env, COMMTUNE_DB=ct.store())
            path = spec(folder, base={**BASE, "steps": 54}, axes={"optimizer.lr": [0.3, 0.0003, 0.03, 0.0001]},
                        early_stopping={"min_steps": 18, "reduction_factor": 3})
            proc = sweep_cli(env, "--spec", path)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            runs = trial_runs(self.last_sweep())
            rungs = {18: 1, 54: 2}  # the segments (jobs) a trial that stopped at that step has run
            every_job = []
            for trial, (run_id, status, reason) in runs.items():
                steps = len(ct.query("SELECT DISTINCT step FROM step_metrics WHERE run_id = ?", (run_id,)))
                self.assertIn(steps, rungs, reason)
                self.assertEqual(status, "succeeded" if steps == 54 else "stopped", reason)
                jobs = jobs_of(run_id)
                self.assertEqual(len(jobs), rungs[steps], (trial, steps, jobs))
                every_job += jobs
            self.assertEqual(len(every_job), len(set(every_job)))
            self.assertTrue(any(len(jobs_of(run_id)) > 1 for (run_id, _, _) in runs.values()))
            # The promoted trial's losses are the same trial's run here in one go, bit for bit.
            best = max(runs.values(), key=lambda r: len(jobs_of(r[0])))[0]
            lr = ct.query("SELECT value FROM run_params WHERE run_id = ? AND name = 'optimizer.lr'", (best,))[0][0]
            local = ct.run_commtune(folder, {"steps": 54, "device": "cpu", "threads": 1, "model.hidden": 64,
                                             "data.features": 32, "world_size": 2, "optimizer.lr": lr})
            self.assertEqual(ct.stored_losses(best), [loss for rank in local.losses() for loss in rank])

    def test_a_requeued_job_is_followed_into_its_next_attempt(self):
        steps = 3000
        with tempfile.TemporaryDirectory() as folder, ct.LocalSlurm(self, nodes=2) as slurm:
            env = dict(slurm.env, COMMTUNE_DB=ct.store())
            spec_path = spec(folder, base={**BASE, "steps": steps}, axes={"optimizer.lr": [0.02]},
                             slurm={"requeue": True})
            proc = subprocess.Popen([ct.CLI, "sweep", "--spec", spec_path], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            try:
                def stored():
                    try:
                        return ct.query("SELECT count(*) FROM step_metrics")[0][0]
                    except sqlite3.OperationalError:
                        return 0
                self.assertIsNotNone(ct.wait_for(lambda: stored() > 50, 180))
                run_id = ct.query("SELECT id FROM runs")[0][0]
                job = jobs_of(run_id)[0]
                self.assertTrue(slurm.step_daemons(job))  # the wait below has something to wait for
                # As a preemption does: SLURM stops the job and queues it again under the same id.
                subprocess.run(["scontrol", "requeue", job], env=env, check=True)
                # SLURM holds a requeued job for two minutes (its BeginTime): let it go sooner, but
                # only once the first attempt has wound down everywhere: the job pending, its step
                # daemons gone, both nodes idle, all of that for 3 s. Released earlier, the new
                # attempt could be ended FAILED before it ran, most likely by a late report of the old
                # attempt's end (seen in CI beside other tests with no wait, and beside stress-ng with
                # the step daemons' exit as the only wait).
                wound_down_since = None

                def released():
                    nonlocal wound_down_since
                    shown = subprocess.run(["scontrol", "-o", "show", "job", job], env=env, capture_output=True,
                                           text=True).stdout
                    node_states = [item.split("=", 1)[1] for item in
                                   subprocess.run(["scontrol", "-o", "show", "node"], env=env, capture_output=True,
                                                  text=True).stdout.split() if item.startswith("State=")]
                    wound_down = ("JobState=PENDING" in shown and not slurm.step_daemons(job) and
                                  len(node_states) == 2 and all(s == "IDLE" for s in node_states))
                    if not wound_down:
                        wound_down_since = None
                        return False
                    if wound_down_since is None:
                        wound_down_since = time.monotonic()
                    if time.monotonic() - wound_down_since < 3:
                        return False
                    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], env=env, check=True)
                    return True
                self.assertIsNotNone(ct.wait_for(released, 60, interval=0.2))
                out, err = proc.communicate(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.assertEqual(proc.returncode, 0, err)
            self.assertEqual(ct.query("SELECT status FROM runs WHERE id = ?", (run_id,))[0][0], "succeeded", err)
            self.assertEqual(jobs_of(run_id), [job])
            restarts = os.path.join(folder, f"sweep-1", f"run-{run_id}", f"to-step-{steps}", "events", "restart-1")
            self.assertTrue(os.path.isdir(restarts), os.listdir(os.path.dirname(restarts)))
            # The second attempt's steps replaced the first's: one row per rank and step, as a local run's.
            local = ct.run_commtune(folder, {"steps": steps, "device": "cpu", "model.hidden": 64,
                                             "data.features": 32, "world_size": 2, "threads": 1, "optimizer.lr": 0.02})
            self.assertEqual(ct.stored_losses(run_id), [loss for rank in local.losses() for loss in rank])


class SlurmScriptSweeps(unittest.TestCase):
    """The user's own script as the trial of a SLURM sweep: each trial's job runs torchrun of the
    script on each of two "nodes", rendezvousing at the first, and streams its events as the
    engine's jobs do; its losses are the same sweep's run here, bit for bit."""

    def setUp(self):
        ct.fresh_store()

    def test_each_trial_runs_torchrun_of_the_script_on_every_node(self):
        script = os.path.join(ct.REPO, "tests", "script_trials", "train_ddp.py")
        with tempfile.TemporaryDirectory() as folder, ct.LocalSlurm(self, nodes=2) as slurm:
            env = dict(slurm.env, COMMTUNE_DB=ct.store())
            common = ("--script", script, "--python", ct.ORACLE_PYTHON, "--steps-arg", "steps", "--set", "steps=6",
                      "--set", "world_size=2", "--set", "threads=1", "--set", "hook.name=powersgd",
                      "--set", "hook.start_powerSGD_iter=2", "--axis", "hook.matrix_approximation_rank=1,2")
            spec_path = os.path.join(folder, "slurm.json")
            with open(spec_path, "w") as f:
                json.dump({"backend": "slurm", "slurm": {"nodes": 2, "ranks_per_node": 1, "folder": folder,
                                                         "poll_s": 0.2, "quiet_limit_s": 120}}, f)
            proc = sweep_cli(env, "--spec", spec_path, *common)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("3 succeeded", proc.stderr)
            remote = ct.query("SELECT max(id) FROM sweeps")[0][0]
            proc = sweep_cli(env, *common)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            local = ct.query("SELECT max(id) FROM sweeps")[0][0]
            remote_runs, local_runs = trial_runs(remote), trial_runs(local)
            self.assertEqual(len(remote_runs), 3)
            for trial, (run_id, status, reason) in remote_runs.items():
                with self.subTest(trial=trial):
                    self.assertEqual(status, "succeeded", reason)
                    self.assertEqual(len(jobs_of(run_id)), 1)
                    got = ct.stored_losses(run_id)
                    self.assertEqual(len(got), 2 * 6)
                    self.assertEqual(got, ct.stored_losses(local_runs[trial][0]))  # bit for bit
            self.assertEqual(queued(env), set())


if __name__ == "__main__":
    unittest.main()

"""Files from outside are untrusted: run summaries and checkpoint folders
given to `export`, event files given to `summarize` and `import`, and the
store itself (a file anyone may have edited). Each case here is one that got
through before: code injected into a generated Python file, one bad row that
broke every listing, a crash or a blow-up from a small file, the wrong rank
blamed, a symlink written through, a pipe that hung, an escape sequence on
the terminal, NaN taken for a number, a Ctrl-C lost at start, and a full
disk that left the store unusable."""
import json
import os
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

INJECTED = "fp16_compress_wrapper(__import__('os').system('id') and None) or default_hooks.fp16"
SMALL = ["--set", "steps=4", "--set", "data.features=8", "--set", "model.hidden=8"]


# The event format (docs/events.md): u32 length | u8 type | body, little-endian.
def frame(kind, body):
    return struct.pack("<IB", len(body), kind) + body


def hello(rank, world):
    return frame(1, struct.pack("<IHIII", 0x56455443, 1, rank, world, 4242))


def stat_name(stat_id, name):
    return frame(2, struct.pack("<HH", stat_id, len(name)) + name)


def step(index, loss, stats=()):
    body = struct.pack("<qdd7dQQ", index, loss, 0.1, *([0.001] * 7), 4096, 4096)
    body += struct.pack("<H", len(stats)) + b"".join(struct.pack("<Hd", i, v) for i, v in stats)
    return frame(3, body + struct.pack("<H", 0))


def message(obj):
    return frame(4, obj if isinstance(obj, bytes) else json.dumps(obj).encode())


def run_start(config):
    return message({"kind": "run_start", "rank": 0, "config": config})


def run_end(rank, steps):
    return message({"kind": "run_end", "rank": rank, "steps": steps, "final_loss": 0.5, "wall_s": 1.0})


def event_file(folder, rank, *frames):
    path = os.path.join(folder, f"events-{rank}.ctev")
    with open(path, "wb") as f:
        f.write(b"".join(frames))
    return path


def good_stream(folder, rank, world=2, steps=4, losses=None, requested=None):
    """A rank's whole stream: `steps` steps of a run that asked for `requested` (default: as many)."""
    losses = losses or [1.0 / (i + 1) for i in range(steps)]
    frames = [hello(rank, world)]
    if rank == 0:
        frames.append(run_start({"steps": requested or steps, "world_size": world}))
    frames += [step(i, loss) for i, loss in enumerate(losses)]
    frames.append(run_end(rank, steps))
    return event_file(folder, rank, *frames)


class Untrusted(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def refused(self, *args, words=(), code=None, timeout=60):
        proc = ct.cli(*args, check=False, timeout=timeout)
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        if code is not None:
            self.assertEqual(proc.returncode, code, proc.stderr)
        self.assertLess(proc.returncode, 128, proc.stderr)  # an error, not a crash
        for bad in ("json.exception", "INTERNAL ASSERT", "frame #", "not in the map"):
            self.assertNotIn(bad, proc.stderr)
        for word in words:
            self.assertIn(word, proc.stderr)
        return proc.stderr

    def summary_file(self, config, name="s.json"):
        with open(self.path(name), "w") as f:
            json.dump({"config": config}, f)
        return self.path(name)

    def one_real_run(self, *settings):
        ct.cli("run", "--quiet", "--summary", self.path("run.json"), *SMALL, *settings)
        return ct.cli_json("list")[0]["id"]


class NoCodeInjection(Untrusted):
    def test_what_reaches_a_generated_file_is_a_value_the_schema_allows(self):
        out = self.path("out")
        cases = (({"hook": {"name": "allreduce", "wrapper": INJECTED}, "ddp": {"bucket_cap_mb": 25}}, "hook.wrapper"),
                 ({"hook": {"name": "post_local_sgd", "hierarchy": "2:2,8:__import__('os')"}}, "hook.hierarchy"),
                 ({"ddp": {"bucket_cap_mb": "x"}}, "ddp.bucket_cap_mb"),
                 ({"hook": "evil"}, "hook"),
                 ("a string", "configuration"))
        for config, field in cases:
            summary = self.summary_file(config)
            for kind in ("production", "launch"):
                err = self.refused("export", kind, "--from", summary, "--out", out, words=(field,))
                self.assertIn(summary, err)  # the error names where the configuration came from
            self.assertFalse(os.path.exists(out) and os.listdir(out), "nothing is written from a refused source")
        # A fair configuration still exports, and its Python is what PyTorch reads.
        summary = self.summary_file({"hook": {"name": "post_local_sgd", "hierarchy": "2:2,8:4"}})
        ct.cli("export", "production", "--from", summary, "--out", out)
        source = open(os.path.join(out, "use_post_local_sgd.py")).read()
        self.assertIn("OrderedDict([(2, 2), (8, 4)])", source)
        compile(source, "use_post_local_sgd.py", "exec")

    def test_an_imported_event_file_cannot_carry_code_into_an_export(self):
        events = self.path("events")
        os.makedirs(events)
        event_file(events, 0, hello(0, 1), run_start({"steps": 2, "hook": {"name": "allreduce", "wrapper": INJECTED}}),
                   step(0, 1.0), step(1, 0.9), run_end(0, 2))
        self.refused("import", events, words=("hook.wrapper", "not imported"))
        self.assertEqual(ct.cli_json("list"), [], "a refused import stores nothing")


class OneBadRowPoisonsNothing(Untrusted):
    def test_every_view_lists_the_good_runs_and_shows_the_bad_ones_as_such(self):
        good = self.one_real_run()
        bad_configs = ['{"hook": "evil"}', '{"hook": {"name": 5}}', '{"seed": "x"}', "[" * 500 + "]" * 500]
        connection = sqlite3.connect(ct.store())
        for config in bad_configs:
            connection.execute("INSERT INTO runs (name, config, status, host, world_size, steps_requested, created_at) "
                               "VALUES ('bad', ?, 'succeeded', 'elsewhere', 2, 4, 0)", (config,))
        connection.execute("INSERT INTO stat_names (name) VALUES (CAST(? AS TEXT))", (b"bad\xff\xfename",))
        stat_id = connection.execute("SELECT max(id) FROM stat_names").fetchone()[0]
        connection.execute("INSERT INTO step_stats (run_id, stat_id, bucket, rank, step, value) VALUES (?, ?, -1, 0, 0, 1)",
                           (good, stat_id))
        connection.commit()
        connection.close()

        listed = ct.cli_json("list")
        self.assertEqual(len(listed), 1 + len(bad_configs))
        bad = [r for r in listed if r["name"] == "bad"]
        self.assertTrue(all("config_problem" in r and r["hook"] == "(unreadable configuration)" for r in bad), bad)
        self.assertNotIn("config_problem", next(r for r in listed if r["id"] == good))
        self.assertIn("(unreadable configuration)", ct.cli("list").stdout)
        compared = ct.cli_json("compare")
        self.assertEqual(len(compared["runs"]), 1 + len(bad_configs))
        ct.cli("export", "runs", "--out", self.path("runs.csv"))
        self.assertEqual(len(open(self.path("runs.csv")).read().splitlines()), 2 + len(bad_configs))
        shown = ct.cli_json("show", good)  # a statistic name that is not UTF-8
        self.assertTrue(any(name.startswith("bad") for name in shown["stats"]))
        self.assertIn("configuration is unreadable", ct.cli("show", bad[0]["id"]).stdout)
        self.refused("show", bad[0]["id"], "--config", words=("unreadable",))
        self.refused("export", "production", "--run", bad[0]["id"], "--out", self.path("o"), words=("no usable",))

    def test_text_from_the_store_cannot_drive_the_terminal(self):
        run = self.one_real_run()
        connection = sqlite3.connect(ct.store())
        connection.execute("UPDATE runs SET status = ?, host = ?, fingerprint = ? WHERE id = ?",
                           ("succeeded\x1b[2J", "node\x1b]0;owned\x07", "\x1b[31mred", run))
        connection.commit()
        connection.close()
        for args in (("show", run), ("list",), ("compare",)):
            out = ct.cli(*args).stdout
            self.assertNotIn("\x1b", out, args)
            self.assertNotIn("\x07", out, args)
        # Characters that reorder or steer what a terminal shows, bytes that are not UTF-8, a 10 KB name.
        steering = "\u202egnp.exe\u2066x\u2069\u009b31m\u200f"
        connection = sqlite3.connect(ct.store())
        connection.execute("UPDATE runs SET name = CAST(? AS BLOB) WHERE id = ?",
                           (steering.encode() + b"\xff\xfe", run))
        # ... and in a parameter's value, which `show` lists.
        connection.execute("UPDATE runs SET config = json_set(config, '$.checkpoint.dir', ?) WHERE id = ?",
                           (steering, run))
        connection.commit()
        connection.close()
        for args in (("show", run), ("list",)):
            out = subprocess.run([ct.CLI, *map(str, args)], capture_output=True, timeout=120).stdout
            for raw in ("\u202e", "\u2066", "\u2069", "\u009b", "\u200f"):
                self.assertNotIn(raw.encode(), out, args)
            self.assertNotIn(b"\xff", out, args)
            self.assertIn(b"\\u202egnp.exe\\u2066x", out, args)
        connection = sqlite3.connect(ct.store())
        connection.execute("UPDATE runs SET name = ? WHERE id = ?", ("n" * 10000, run))
        connection.commit()
        connection.close()
        widest = max(len(line) for line in ct.cli("list").stdout.splitlines())
        self.assertLess(widest, 400)
        # A configuration file's text, quoted in an error, is escaped too.
        spec = os.path.join(self.dir, "spec.json")
        with open(spec, "w") as f:
            json.dump({"axes": {"optimizer.lr": [0.1]}, "strategy": "grid\x1b[2J"}, f)
        proc = ct.cli("sweep", "--plan", "--spec", spec, check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("grid\\x1b[2J", proc.stderr)
        self.assertNotIn("\x1b", proc.stderr)
        # A rank's error text from an event file, in the one-line conclusion.
        events = event_file(self.dir, 0, hello(0, 1), run_start({"steps": 4, "world_size": 1}),
                            message({"kind": "error", "error_kind": "runtime", "message": "boom\x1b[2J"}))
        proc = ct.cli("summarize", events, check=False)
        self.assertIn("boom\\x1b[2J", proc.stderr)
        self.assertNotIn("\x1b", proc.stderr)


class EventFilesWithinBounds(Untrusted):
    def test_deep_nesting_and_long_names_are_refused_before_they_cost_anything(self):
        # The bad message after more than one read's worth (4 MiB) of steps:
        # the import has stored the run by then, and must end it.
        steps = [step(i, 1.0) for i in range(50000)]
        deep = event_file(self.dir, 0, hello(0, 1), run_start({"steps": 100000, "world_size": 1}), *steps,
                          message(b'{"kind":"log","x":' + b"[" * 1000000 + b"]" * 1000000 + b"}"))
        for command in ("summarize", "import"):
            self.refused(command, deep, words=("nests more than 64",))
        self.assertEqual([r["status"] for r in ct.cli_json("list")], ["failed"], "an import cut short is not running")
        name = b"n" * 65535
        blowup = event_file(self.dir, 0, hello(0, 1), run_start({"steps": 6000}), stat_name(0, name),
                            *[step(i, 1.0, [(0, 1.0)]) for i in range(6000)])
        started = time.monotonic()
        self.refused("summarize", blowup, words=("statistic name",))
        self.assertLess(time.monotonic() - started, 20)
        # A 23-byte hello claiming 65536 ranks (the most a file may claim): a
        # short summary that counts the ranks never heard from (found by fuzz_event_files).
        claims = event_file(self.dir, 0, hello(0, 65536))
        proc = ct.cli("summarize", claims, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertLess(len(proc.stdout), 10000)
        self.assertEqual(json.loads(proc.stdout)["launcher"]["ranks_never_heard_from"], 65534)

    def test_the_outcome_of_a_stream_is_what_its_numbers_say(self):
        runs = self.path("nan")
        os.makedirs(runs)
        for rank in (0, 1):
            good_stream(runs, rank, losses=[1.0, 0.9, float("nan"), float("inf")])
        proc = ct.cli("import", runs, "--name", "nan", check=False)
        self.assertEqual(proc.returncode, 3, proc.stderr)  # diverged
        self.assertEqual(ct.cli_json("list")[0]["status"], "diverged")
        short = self.path("short")
        os.makedirs(short)
        files = [good_stream(short, rank, steps=2, requested=4) for rank in (0, 1)]  # ends after 2 of 4 steps
        proc = ct.cli("summarize", *files, check=False)
        summary = json.loads(proc.stdout)
        self.assertEqual(summary["status"], "failed", proc.stderr)
        self.assertIn("of a run of 4 steps", summary["reason"])

    def test_the_rank_that_stopped_first_is_blamed(self):
        folder = self.path("stopped")
        os.makedirs(folder)
        event_file(folder, 0, hello(0, 2), run_start({"steps": 100, "world_size": 2}),
                   *[step(i, 1.0) for i in range(40)])
        event_file(folder, 1, hello(1, 2), *[step(i, 1.0) for i in range(12)])
        summary = json.loads(ct.cli("summarize", os.path.join(folder, "events-0.ctev"),
                                    os.path.join(folder, "events-1.ctev"), check=False).stdout)
        self.assertEqual(summary["failed_rank"], 1, summary)
        self.assertIn("after step 11", summary["reason"])

    def test_following_gives_up_on_a_silent_rank_while_another_still_writes(self):
        folder = self.path("follow")
        os.makedirs(folder)
        event_file(folder, 1, hello(1, 2), *[step(i, 1.0) for i in range(3)])
        rank0 = os.path.join(folder, "events-0.ctev")
        with open(rank0, "wb") as f:
            f.write(hello(0, 2) + run_start({"steps": 100000, "world_size": 2}))
        done = threading.Event()

        def keep_writing():
            index = 0
            while not done.is_set():
                with open(rank0, "ab") as f:
                    f.write(step(index, 1.0))
                index += 1
                time.sleep(0.05)

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            started = time.monotonic()
            proc = ct.cli("import", "--follow", "--quiet", "--quiet-after", "2", folder, check=False, timeout=120)
            waited = time.monotonic() - started
        finally:
            done.set()
            writer.join()
        self.assertEqual(proc.returncode, 1, proc.stderr)
        run = ct.cli_json("list")[0]
        self.assertEqual(run["status"], "failed")
        self.assertIn("rank 1 failed", run["reason"])
        self.assertIn("nothing came for 2 s", run["reason"])
        self.assertLess(waited, 60)


class OutputAndInputFiles(Untrusted):
    def test_exports_replace_a_symlink_and_refuse_what_is_not_a_regular_file(self):
        summary = self.summary_file({"steps": 4})
        out = self.path("out")
        os.makedirs(out)
        target = self.path("precious.txt")
        with open(target, "w") as f:
            f.write("keep me")
        os.symlink(target, os.path.join(out, "run.json"))
        ct.cli("export", "launch", "--from", summary, "--out", out)
        self.assertEqual(open(target).read(), "keep me")
        self.assertFalse(os.path.islink(os.path.join(out, "run.json")))
        self.assertEqual(json.load(open(os.path.join(out, "run.json")))["steps"], 4)
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        for source in (fifo, "/dev/zero"):
            self.refused("export", "launch", "--from", source, "--out", out, words=("not a regular file",), timeout=20)
        self.refused("export", "launch", "--from", self.summary_file("a string"), "--out", out,
                     words=(self.path("s.json"),))
        # A summary whose checkpoint list is something else is not one: nothing is written from it.
        with open(self.path("bad-checkpoints.json"), "w") as f:
            json.dump({"config": {"steps": 4}, "checkpoints": "abc"}, f)
        elsewhere = self.path("not-written")
        self.refused("export", "launch", "--from", self.path("bad-checkpoints.json"), "--out", elsewhere,
                     words=('"checkpoints" is string, not the list of checkpoint folders',))
        self.assertFalse(os.path.exists(elsewhere))

    def test_a_crafted_checkpoint_gets_one_line_naming_its_file(self):
        checkpoints = self.path("ck")
        self.one_real_run("--set", "hook.name=powersgd", "--set", "hook.start_powerSGD_iter=2",
                          "--set", f"checkpoint.dir={checkpoints}", "--set", "checkpoint.every=2")
        folder = os.path.join(checkpoints, sorted(os.listdir(checkpoints))[-1])
        rank0 = os.path.join(folder, "rank-0.pt")
        for crafted in ('{"format": "commtune.checkpoint", "version": 1, "world_size": 2, "step": 2}',
                        '{"format": "commtune.checkpoint", "version": 1, "world_size": 2, "step": 2, "hook": 5}',
                        '{"format": "commtune.checkpoint", "version": 1, "world_size": "x", "step": [], "hook": {}}'):
            subprocess.run([ct.ORACLE_PYTHON, "-c", f"import torch; torch.save({crafted}, {rank0!r})"], check=True)
            self.refused("export", "powersgd", "--from", folder, "--runtime-state", "--out", self.path("o"),
                         words=("rank-0.pt",))


class Numbers(Untrusted):
    def test_nan_and_overflowing_numbers_are_refused_naming_the_option(self):
        run = self.one_real_run()
        for args, word in ((("import", "--quiet-after", "nan", self.dir), "--quiet-after"),
                           (("recommend", run, "--tolerance", "nan"), "--tolerance"),
                           (("recommend", run, "--min-speedup", "nan"), "--min-speedup"),
                           (("predict", run, "--nodes", "2147483647", "--gpus-per-node", "2147483647"), "--nodes")):
            self.refused(*args, words=(word,))
        summary = self.summary_file({"hook": {"name": "byteps", "ranks_per_node": 3}})
        self.refused("export", "launch", "--from", summary, "--out", self.path("o"), "--nodes", "2",
                     "--ranks-per-node", "1", words=("hook.ranks_per_node",))
        ct.cli("export", "launch", "--from", self.summary_file({"steps": 4}), "--out", self.path("o6"),
               "--rendezvous", "[::1]:29400")
        self.refused("sweep", "--axis", "optimizer.lr=0.05,0.1", "--objective", "step_time", "--plan", *SMALL,
                     words=("objective",))


def catches(pid, sig):
    """Whether process `pid` has a handler for `sig` (its SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(mask & (1 << (sig - 1)))


class Signals(Untrusted):
    def test_ctrl_c_right_at_start_cancels_the_run(self):
        # A background job starts with SIGINT ignored. Once commtune's main
        # runs (its handler is the first thing it installs), the signal must
        # cancel, however early: before the store is open, before any worker.
        for delay in (0, 0.3):
            proc = subprocess.Popen([ct.CLI, "run", "--quiet", "--summary", self.path("s.json"), "--set",
                                     "steps=100000", "--set", "data.features=8", "--set", "model.hidden=8"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            self.assertIsNotNone(ct.wait_for(lambda: catches(proc.pid, signal.SIGINT), 60))
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                self.fail(f"a SIGINT {delay} s after start did not stop the run")
            self.assertEqual(proc.returncode, 130, err)
        # Every run it started ended cancelled, its workers stopped and waited for.
        self.assertTrue(all(r["status"] == "cancelled" for r in ct.cli_json("list")), ct.cli_json("list"))


    def test_ctrl_c_or_sigterm_stops_an_import_and_keeps_what_it_read(self):
        steps = 400_000
        frames = [hello(0, 1), run_start({"steps": steps, "world_size": 1})]
        frames += [step(i, 1.0 / (i + 1)) for i in range(steps)]
        events = event_file(self.dir, 0, *frames, run_end(0, steps))
        for sig in (signal.SIGINT, signal.SIGTERM):
            proc = subprocess.Popen([ct.CLI, "import", events, "--quiet"], stderr=subprocess.PIPE, text=True)
            self.assertIn("importing as run", proc.stderr.readline())
            time.sleep(0.2)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 128 + sig, err)
            run = ct.cli_json("list")[-1]
            self.assertEqual(run["status"], "cancelled", run)
            self.assertEqual(run["reason"], "the import was stopped before the end of its event files")
            self.assertLess(run["steps_completed"], steps)  # it stopped reading, not at the end
            stored = ct.query("SELECT count(*) FROM step_metrics WHERE run_id = ?", (run["id"],))[0][0]
            self.assertGreaterEqual(stored, run["steps_completed"])  # every step it counts is kept


class DiskFull(Untrusted):
    def mount_small_disk(self, megabytes):
        disk = self.path("disk")
        os.makedirs(disk)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", disk],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            self.skipTest("a small disk needs mounting a tmpfs (root): " + proc.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", disk])
        return disk

    def test_a_full_disk_stops_the_run_and_the_store_recovers(self):
        disk = self.mount_small_disk(2)
        store = os.path.join(disk, "runs.db")
        filler = os.path.join(disk, "filler")
        with open(filler, "wb") as f:
            f.write(bytes(1200 * 1024))
        started = time.monotonic()
        summary_path = os.path.join(self.dir, "full-disk-summary.json")
        proc = subprocess.run([ct.CLI, "--db", store, "run", "--quiet", "--set", "steps=100000", "--set",
                               "data.features=8", "--set", "model.hidden=8", "--summary", summary_path],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("stopped writing", proc.stderr)
        # What the ranks sent and the store could not keep is counted, not lost silently.
        with open(summary_path) as f:
            summary = json.load(f)
        self.assertLess(time.monotonic() - started, 240)
        os.remove(filler)
        connection = sqlite3.connect(store)
        stored = connection.execute("SELECT count(*) FROM step_metrics").fetchone()[0]
        connection.close()
        completed = summary["steps"]["completed"] * summary["world_size"]
        if stored < completed:
            lost = re.search(r"(\d+) step rows the ranks sent were not stored", proc.stderr)
            self.assertIsNotNone(lost, proc.stderr)
            self.assertGreaterEqual(stored + int(lost.group(1)), completed, proc.stderr)
        listed = json.loads(subprocess.run([ct.CLI, "--db", store, "list", "--json"], capture_output=True,
                                           text=True, check=True).stdout)
        self.assertEqual(len(listed), 1)
        self.assertIn(listed[0]["status"], ("failed", "interrupted"))
        wal = store + "-wal"
        self.assertLess(os.path.getsize(wal) if os.path.exists(wal) else 0, 256 * 1024)
        # The store takes new runs again.
        subprocess.run([ct.CLI, "--db", store, "run", "--quiet", *SMALL], capture_output=True, check=True)


if __name__ == "__main__":
    unittest.main()

"""The run store on a real SQLite file, through the real CLI: every run is
kept with all its metrics; a reader never blocks a running job; a launcher
killed mid-run leaves a consistent file whose committed metrics are all
there; damaged and foreign files get a clear error and stay untouched."""
import csv
import hashlib
import io
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


def step_rows(run_id):
    return ct.query("SELECT count(*) FROM step_metrics WHERE run_id = ?", (run_id,))[0][0]


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


class StoredRuns(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def test_a_run_is_stored_with_every_step_of_every_rank(self):
        with tempfile.TemporaryDirectory() as d:
            run = ct.run_commtune(d, {"steps": 30, "world_size": 2}, extra_args=["--name", "kept"])
            run_id = run.summary["run_id"]
            listed = ct.cli_json("list")
            self.assertEqual([(r["id"], r["name"], r["status"], r["steps_completed"]) for r in listed],
                             [(run_id, "kept", "succeeded", 30)])
            shown = ct.cli_json("show", run_id)
            self.assertEqual(shown["config"], run.summary["config"])
            self.assertIn("comm.allreduce.bytes", shown["stats"])
            # The stored losses are the workers' losses, bit for bit.
            exported = list(csv.DictReader(io.StringIO(ct.cli("export", "runs", run_id, "--metrics").stdout)))
            self.assertEqual(len(exported), 2 * 30)
            stored = [[float(r["loss"]) for r in exported if int(r["rank"]) == rank] for rank in range(2)]
            self.assertEqual(stored, run.losses())
            # Typed parameters: filter runs by them.
            self.assertEqual(len(ct.cli_json("list", "--param", "world_size=2")), 1)
            self.assertEqual(len(ct.cli_json("list", "--param", "hook.name=powersgd")), 0)

    def test_no_store_keeps_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            ct.run_commtune(d, {"steps": 3}, extra_args=["--no-store"])
            self.assertFalse(os.path.exists(ct.store()) and ct.cli_json("list"))

    def test_a_reader_never_blocks_the_running_job(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics_path, _ = ct.start_commtune(d, {"steps": 400, "world_size": 2})
            seen, reads, slowest = [], 0, 0.0
            while proc.poll() is None:
                started = time.monotonic()
                try:
                    # A reader that holds its read transaction open a while, as a GUI refresh would.
                    connection = sqlite3.connect(f"file:{ct.store()}?mode=ro", uri=True, timeout=0.1)
                    connection.execute("BEGIN")
                    rows = connection.execute("SELECT count(*) FROM step_metrics").fetchone()[0]
                    time.sleep(0.05)
                    connection.execute("COMMIT")
                    connection.close()
                except sqlite3.OperationalError as e:
                    if "no such table" in str(e) or "unable to open" in str(e):
                        continue  # the store is being created
                    raise
                slowest = max(slowest, time.monotonic() - started - 0.05)
                seen.append(rows)
                reads += 1
            self.assertEqual(proc.returncode, 0, proc.stderr.read())
            self.assertGreater(reads, 10)
            self.assertEqual(seen, sorted(seen), "a reader saw rows disappear")
            self.assertGreater(len(set(seen)), 3, "the reader saw the rows only at the end")
            self.assertLess(slowest, 1.0)
            run = ct.cli_json("list")[0]
            self.assertEqual(step_rows(run["id"]), 2 * 400)

    def test_a_killed_launcher_leaves_an_interrupted_run_with_its_metrics(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics_path, _ = ct.start_commtune(d, {"steps": 100000, "world_size": 2})
            workers = ct.wait_until_training(proc, metrics_path, 2)
            # Wait until every rank has stored more than 100 steps (the ranks' commits interleave, so a total
            # of 200 rows can still be 101 and 99).
            def steps_every_rank_stored():
                counts = [count for (count,) in ct.query("SELECT count(*) FROM step_metrics GROUP BY rank")]
                return min(counts) if len(counts) == 2 else 0
            self.assertIsNotNone(ct.wait_for(lambda: steps_every_rank_stored() > 100, 60))
            committed = ct.query("SELECT rank, step, loss FROM step_metrics ORDER BY rank, step")
            stored_before_kill = steps_every_rank_stored()
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            # The workers notice and go within seconds: no orphans.
            self.assertIsNotNone(ct.wait_for(lambda: not any(ct.is_running(p) for p in workers), 15))
            # Still 'running' for a reader that cannot tell; the next writer marks it interrupted.
            run = ct.cli_json("list")[0]
            self.assertEqual(run["status"], "interrupted")
            after = ct.query("SELECT rank, step, loss FROM step_metrics ORDER BY rank, step")
            # Its counters say what was committed: the steps every rank stored, the time to the last of them.
            every_rank = min(ct.query("SELECT max(step) + 1 FROM step_metrics GROUP BY rank"))[0]
            self.assertEqual(run["steps_completed"], every_rank)
            self.assertGreaterEqual(run["steps_completed"], stored_before_kill)
            self.assertAlmostEqual(run["wall_s"], ct.query("SELECT max(wall_s) FROM step_metrics")[0][0])
            self.assertIsNotNone(run["final_loss"])
            self.assertTrue(set(committed) <= set(after), "metrics committed before the kill were lost")
            self.assertEqual(ct.query("PRAGMA integrity_check"), [("ok",)])


class StampKeys(unittest.TestCase):
    """A run's configuration is stamped (db/config_check.h) with a hash keyed by a secret of the user's,
    stamp.key in the data folder: made on first use for the user alone, and a file there that is not such a
    key (others may read it, it is a FIFO, it holds something else) stamps nothing, without waiting or
    failing the run."""

    def run_with_data_folder(self, data, db):
        proc = subprocess.run([ct.CLI, "--db", db, "run", "--quiet", "--set", "steps=2"], capture_output=True,
                              text=True, timeout=120, env={**os.environ, "XDG_DATA_HOME": data})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return ct.query("SELECT config_stamp FROM runs ORDER BY id DESC LIMIT 1", path=db)[0][0]

    def test_a_key_is_made_for_the_user_alone_and_anything_else_stamps_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            key = os.path.join(d, "commtune", "stamp.key")
            stamp = self.run_with_data_folder(d, os.path.join(d, "a.db"))
            self.assertIsNotNone(stamp)
            self.assertEqual(os.stat(key).st_mode & 0o777, 0o600)
            with open(key) as f:
                secret = f.read()
            self.assertRegex(secret, r"^[0-9a-f]{32}\n$")
            self.assertEqual(self.run_with_data_folder(d, os.path.join(d, "b.db")), stamp, "the key was not kept")
            os.chmod(key, 0o644)
            self.assertIsNone(self.run_with_data_folder(d, os.path.join(d, "c.db")))
            os.chmod(key, 0o600)
            with open(key, "w") as f:
                f.write("not a key\n")
            self.assertIsNone(self.run_with_data_folder(d, os.path.join(d, "d.db")))
            os.remove(key)
            os.mkfifo(key, 0o600)
            self.assertIsNone(self.run_with_data_folder(d, os.path.join(d, "e.db")))


class BadFiles(unittest.TestCase):
    def check_refused(self, path, words):
        before = digest(path)
        for args in (["list"], ["run", "--quiet", "--set", "steps=2"]):
            proc = ct.cli("--db", path, *args, check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn(words, proc.stderr)
            self.assertNotIn("Traceback", proc.stderr)
        self.assertEqual(digest(path), before, "the file was changed")

    def test_a_text_file_is_not_a_store(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "notes.db")
            open(path, "w").write("my notes, not a database\n" * 100)
            self.check_refused(path, "not a commtune")

    def test_another_programs_database_is_left_alone(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "other.db")
            connection = sqlite3.connect(path)
            connection.execute("CREATE TABLE contacts (name TEXT)")
            connection.execute("INSERT INTO contacts VALUES ('ada')")
            connection.commit()
            connection.close()
            self.check_refused(path, "not a commtune")

    def test_a_damaged_store_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.db")
            ct.cli("--db", path, "run", "--quiet", "--set", "steps=5", "--summary", os.path.join(d, "s.json"))
            data = bytearray(open(path, "rb").read())
            self.assertGreater(len(data), 8192)
            data[4096:8192] = b"\xa5" * 4096  # smash a page of the file
            open(path, "wb").write(bytes(data))
            before = digest(path)
            proc = ct.cli("--db", path, "list", check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("damaged", proc.stderr)
            self.assertEqual(digest(path), before)

    def test_a_store_damaged_where_a_run_would_write_is_not_written(self):
        """The last page smashed: a run's first writes (its row) land elsewhere and succeed, so the damage
        is found before anything is written or not at all."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.db")
            for _ in range(4):
                ct.cli("--db", path, "run", "--quiet", "--summary", os.devnull, "--set", "steps=3", "--set",
                       "model.hidden=64", "--set", "data.features=32")
            data = bytearray(open(path, "rb").read())
            data[-4096:] = b"\xa5" * 4096
            open(path, "wb").write(bytes(data))
            before = digest(path)
            proc = ct.cli("--db", path, "run", "--quiet", "--summary", os.devnull, "--set", "steps=3", check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("is damaged (database disk image is malformed); commtune will not write to it", proc.stderr)
            self.assertNotIn("stored as run", proc.stderr)
            self.assertEqual(digest(path), before, "the file was changed")
            self.assertEqual(sorted(os.listdir(d)), ["runs.db"])

    def test_thousands_of_runs_are_listed_whole_and_in_order(self):
        """Big stores are read and written on every core, a block of rows at a time: 5000 runs (more than one
        block) come out each once, in the order asked for, each with its own name and hook, and the same
        whether or not the figures a query reads were parsed."""
        ct.cli("run", "--quiet", "--set", "steps=2", "--set", "hook.name=fp16_compress")
        connection = sqlite3.connect(ct.store())
        columns = [r[1] for r in connection.execute("PRAGMA table_info(runs)") if r[1] not in ("id", "name", "trial")]
        connection.execute(
            f"INSERT INTO runs (id, name, {', '.join(columns)}) WITH RECURSIVE c(k) AS (SELECT 2 UNION ALL "
            f"SELECT k + 1 FROM c WHERE k < 5000) SELECT k, 'copy ' || ((k * 7919) % 5000), "
            f"{', '.join(columns)} FROM runs, c WHERE runs.id = 1")
        connection.commit()
        connection.close()
        for args, order in ((("list",), "id"), (("list", "--sort", "name", "--desc"), "name DESC, id"),
                            (("list", "--search", "hook = fp16_compress"), "id")):
            listed = ct.cli_json(*args)
            expected = ct.query(f"SELECT id, name FROM runs ORDER BY {order}")
            self.assertEqual([(r["id"], r["name"]) for r in listed], [tuple(r) for r in expected], args)
            self.assertEqual({r["hook"] for r in listed}, {"fp16_compress"})

    def test_a_store_in_a_read_only_folder_is_read_and_not_written(self):
        """A store on a read-only share (here: a folder this user cannot write; as root, whom permissions do
        not stop, the commands run as `nobody`): every command that reads answers as it does elsewhere, and
        one that writes says why it cannot, naming the folder. SQLite's WAL mode wants to create a file
        beside the store even to read it, which must not fail every command with "unable to open database"."""
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            folder = os.path.join(d, "share")
            os.mkdir(folder)
            path = os.path.join(folder, "runs.db")
            for hook in ("allreduce", "fp16_compress"):
                ct.cli("--db", path, "run", "--quiet", "--set", "steps=5", "--set", f"hook.name={hook}",
                       "--summary", os.path.join(d, "s.json"))
            expected = {args: ct.cli("--db", path, *args).stdout for args in
                        (("list", "--json"), ("show", "2", "--json"), ("compare", "1", "2", "--json"),
                         ("export", "runs", "1", "--metrics"))}
            os.chmod(path, 0o444)
            os.chmod(folder, 0o555)
            before = digest(path)
            as_reader = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
            try:
                for args, output in expected.items():
                    proc = subprocess.run([*as_reader, ct.CLI, "--db", path, *args], capture_output=True,
                                          text=True, timeout=120)
                    self.assertEqual((proc.returncode, proc.stdout), (0, output), f"{args}: {proc.stderr}")
                proc = subprocess.run([*as_reader, ct.CLI, "--db", path, "run", "--quiet", "--set", "steps=2"],
                                      capture_output=True, text=True, timeout=120)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn(f"its folder {folder} is not writable here", proc.stderr)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
            finally:
                os.chmod(folder, 0o755)
            self.assertEqual(digest(path), before, "the file was changed")

    def test_a_newer_store_is_not_downgraded(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.db")
            ct.cli("--db", path, "list")
            connection = sqlite3.connect(path)
            connection.execute("PRAGMA user_version = 99")
            connection.commit()
            connection.close()
            proc = ct.cli("--db", path, "list", check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("newer", proc.stderr)


class EditedRows(unittest.TestCase):
    """A store edited by hand or damaged row by row (here with sqlite3, as a user would): a value that
    is not there, or not a number, is missing, never 0, and a verdict says which run lacks it. Two runs,
    allreduce and fp16, made once; each test edits a copy."""
    SMALL = ["--set", "model.hidden=128", "--set", "data.features=64", "--set", "world_size=2", "--set",
             "steps=30"]

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.made = os.path.join(cls.folder.name, "made.db")
        for hook in ("allreduce", "fp16_compress"):
            ct.cli("--db", cls.made, "run", "--quiet", "--summary", os.devnull, *cls.SMALL, "--set",
                   f"hook.name={hook}", "--name", hook)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def setUp(self):
        self.path = os.path.join(self.folder.name, f"{self._testMethodName}.db")
        source = sqlite3.connect(self.made)
        copy = sqlite3.connect(self.path)
        source.backup(copy)
        source.close()
        copy.close()

    def edit(self, sql, params=()):
        connection = sqlite3.connect(self.path)
        connection.execute(sql, params)
        connection.commit()
        connection.close()

    def cli_json(self, *args):
        return json.loads(ct.cli("--db", self.path, *args, "--json").stdout)

    def recommend(self):
        return self.cli_json("recommend", "1", "2", "--network", "100mbit", "--tolerance", "10")

    def test_step_losses_that_are_not_there_leave_the_run_out_of_the_verdict(self):
        fp16 = next(c for c in self.recommend()["candidates"] if c["run_id"] == 2)
        self.assertNotIn("excluded", fp16)  # as made, it is judged
        self.edit("UPDATE step_metrics SET loss = NULL WHERE run_id = 2")
        self.edit("UPDATE runs SET digest = NULL WHERE id = 2")
        r = self.recommend()
        self.assertIsNone(r["chosen_run"])
        fp16 = next(c for c in r["candidates"] if c["run_id"] == 2)
        self.assertIn("run 2 has no loss for its last steps in the store", fp16["excluded"])
        self.assertIsNone(fp16["loss"])
        row = next(row for row in self.cli_json("compare", "1", "2")["runs"] if row["id"] == 2)
        self.assertIsNone(row["digest"]["tail_loss"])
        self.assertIsNone(row["loss_change"])
        self.assertEqual(row["no_loss_change_because"], "its tail loss is not in the store")
        text = ct.cli("--db", self.path, "compare", "1", "2").stdout
        self.assertIn("vs base is - for run 2: its tail loss is not in the store", text)
        # Its baseline's loss missing: every candidate says whose.
        self.edit("UPDATE step_metrics SET loss = 'abc' WHERE run_id = 1")
        self.edit("UPDATE runs SET digest = NULL WHERE id = 1")
        self.edit("UPDATE step_metrics SET loss = 1.5 WHERE run_id = 2")
        fp16 = next(c for c in self.recommend()["candidates"] if c["run_id"] == 2)
        self.assertIn("its baseline's run 1 has no loss for its last steps in the store", fp16["excluded"])

    def test_a_final_loss_or_step_time_that_is_no_number_is_shown_as_missing(self):
        self.edit("UPDATE runs SET final_loss = 'abc' WHERE id = 1")
        self.edit("UPDATE runs SET final_loss = 'Infinity' WHERE id = 2")
        self.assertEqual([r["final_loss"] for r in self.cli_json("list")], [None, None])
        for line in ct.cli("--db", self.path, "list").stdout.splitlines()[1:]:
            self.assertNotIn("0.0000", line)
        # A step time NULL on one rank, or negative: the run's ms/step is missing, not 0.00 or -1000.00.
        self.edit("UPDATE runs SET digest = NULL, samples = NULL")
        self.edit("UPDATE step_metrics SET t_step = NULL WHERE run_id = 1 AND step = 25 AND rank = 1")
        self.edit("UPDATE step_metrics SET t_step = -1 WHERE run_id = 2 AND step = 20")
        for run in (1, 2):
            self.assertIsNone(self.cli_json("show", run)["digest"]["step_ms"], run)
            shown = ct.cli("--db", self.path, "show", run).stdout
            self.assertIn("ms/step      - ", shown)
        proc = ct.cli("--db", self.path, "predict", "2", "--network", "1gbit", check=False)
        self.assertEqual(proc.returncode, 2, proc.stdout)
        self.assertIn("run 2 has no t_step for rank 0 at step 20 in the store (it holds -1.000000)", proc.stderr)

    def test_a_stored_profile_of_other_ranks_than_its_run_had_is_not_read(self):
        before = self.cli_json("predict", "2", "--network", "1gbit", "--nodes", "2")
        blob = bytearray(ct.query("SELECT samples FROM runs WHERE id = 2", path=self.path)[0][0])
        self.assertEqual(blob[:4], b"CTSP")
        blob[8:12] = (1000).to_bytes(4, "little")  # world_size
        self.edit("UPDATE runs SET samples = ? WHERE id = 2", (bytes(blob),))
        after = self.cli_json("predict", "2", "--network", "1gbit", "--nodes", "2")
        self.assertEqual(after["runs"][0]["predictions"], before["runs"][0]["predictions"])  # read from its steps

    def test_a_configuration_that_says_two_things_of_a_key_or_holds_no_double_is_unreadable(self):
        config = ct.query("SELECT config FROM runs WHERE id = 2", path=self.path)[0][0]
        self.edit("UPDATE runs SET config = ?, config_stamp = NULL WHERE id = 2",
                  (config.replace('"hook":{', '"hook":{"name":"allreduce",', 1),))
        shown = ct.cli("--db", self.path, "show", "2").stdout
        self.assertIn('configuration is unreadable: not JSON: an object in it repeats the key "name"', shown)
        self.edit("UPDATE runs SET config = ?, config_stamp = NULL WHERE id = 2",
                  (config.replace('"lr":', '"lr":1e400,"x":', 1),))
        shown = ct.cli("--db", self.path, "show", "2").stdout
        self.assertIn("configuration is unreadable: not JSON: number overflow parsing '1e400'", shown)
        # A configuration file of the user's says the same.
        with open(os.path.join(self.folder.name, "twice.json"), "w") as f:
            f.write('{"steps": 3, "steps": 300}')
        proc = ct.cli("--db", self.path, "run", "--config", f.name, check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn('twice.json is not valid JSON: an object in it repeats the key "steps"', proc.stderr)

    def test_a_baseline_that_probed_another_link_is_named_as_such(self):
        probe = json.loads(ct.query("SELECT digest FROM runs WHERE id = 1", path=self.path)[0][0])["link_probe"]
        probe["seconds"] = [1000 * t for t in probe["seconds"]]  # the probe of a link 1000 times slower
        probe["attempts"] = [[1000 * t for t in a] for a in probe["attempts"]]
        self.edit("UPDATE runs SET digest = json_set(digest, '$.link_probe', json(?)), samples = NULL WHERE id = 1",
                  (json.dumps(probe),))
        self.edit("UPDATE run_events SET body = json_set(body, '$.link_probe', json(?)) WHERE run_id = 1 AND "
                  "kind = 'run_start'", (json.dumps(probe),))
        fp16 = next(c for c in self.recommend()["candidates"] if c["run_id"] == 2)
        self.assertIn("the allreduce run with the same parameters outside the hook (run 1) probed another link",
                      fp16["excluded"])
        self.assertNotIn("no allreduce run", fp16["excluded"])
        table = ct.cli("--db", self.path, "recommend", "1", "2", "--network", "100mbit", "--tolerance", "10").stdout
        self.assertIn(fp16["excluded"], table)  # the reason whole, not cut at the table's width
        text = ct.cli("--db", self.path, "compare", "1", "2").stdout
        self.assertIn("vs base is - for run 2: the allreduce run with the same parameters outside the hook (run 1) "
                      "probed another link: 0.00", text)
        row = next(row for row in self.cli_json("compare", "1", "2")["runs"] if row["id"] == 2)
        self.assertIn("probed another link", row["no_loss_change_because"])


if __name__ == "__main__":
    unittest.main()

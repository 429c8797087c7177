"""Every file commtune writes is written whole or not at all (core/tuner/io/output_file.h): through a
temporary name beside it, renamed when whole. A symlink at the destination is replaced, never
written through (a device or a pipe there is written to as a stream); a writer ended by SIGTERM or
SIGINT halfway, or one that runs out of room,
leaves the destination as it was and no temporary file behind. Each case is a real command, a
real signal at a real moment, and a real file-size limit (RLIMIT_FSIZE, what a full disk does
to write(2))."""
import glob
import json
import os
import resource
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

SMALL = ["--set", "model.hidden=64", "--set", "data.features=32", "--set", "world_size=2", "--set", "steps=4"]
ROWS = 400_000  # step rows in the big store: an export of them takes a second or more


def limited_file_size(limit):
    """For preexec_fn: files may grow to `limit` bytes (write(2) fails past it, EFBIG)."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


class OutputFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.db = os.path.join(cls.folder.name, "big.db")
        ct.cli("--db", cls.db, "run", "--quiet", "--summary", os.devnull, *SMALL)
        connection = sqlite3.connect(cls.db)  # a long run's rows, copied from the first step's
        connection.execute(
            "INSERT INTO step_metrics SELECT run_id, rank, step + 1000 * k, wall_s, loss, lr, t_data, t_forward, "
            "t_backward, t_comm_wait, t_hook, t_optimizer, t_step, wire_bytes, uncompressed_bytes FROM step_metrics, "
            f"(WITH RECURSIVE c(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM c WHERE k < {ROWS // 8}) SELECT k FROM c)")
        connection.commit()
        cls.rows = connection.execute("SELECT count(*) FROM step_metrics").fetchone()[0]
        connection.close()

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def setUp(self):
        self.d = tempfile.mkdtemp(dir=self.folder.name)

    def leftovers(self, path):
        return glob.glob(glob.escape(path) + ".tmp*")

    def test_a_symlink_at_the_destination_is_replaced_not_written_through(self):
        target = os.path.join(self.d, "precious.txt")
        with open(target, "w") as f:
            f.write("keep me\n")
        outputs = {name: os.path.join(self.d, name) for name in ("runs.csv", "summary.json", "metrics.jsonl")}
        for path in outputs.values():
            os.symlink(target, path)
        ct.cli("--db", self.db, "export", "runs", "-o", outputs["runs.csv"])
        ct.cli("--db", os.path.join(self.d, "s.db"), "run", "--quiet", *SMALL, "--summary", outputs["summary.json"],
               "--metrics", outputs["metrics.jsonl"])
        self.assertEqual(open(target).read(), "keep me\n")
        for name, path in outputs.items():
            self.assertFalse(os.path.islink(path), name)
            self.assertGreater(os.path.getsize(path), 0, name)
            self.assertEqual(self.leftovers(path), [], name)
        self.assertTrue(open(outputs["runs.csv"]).read().startswith("id,"))
        self.assertEqual(len(open(outputs["metrics.jsonl"]).read().splitlines()), 2 * 4)

    def test_a_worker_never_writes_its_event_file_through_a_symlink(self):
        target = os.path.join(self.d, "precious.txt")
        with open(target, "w") as f:
            f.write("keep me\n")
        events = os.path.join(self.d, "events-0.ctev")
        os.symlink(target, events)
        with socket.socket() as s:  # a port nobody listens on, should the worker get as far as its rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), COMMTUNE_EVENT_FILE=events)
        proc = subprocess.run([ct.WORKER, *SMALL], env=env, capture_output=True, text=True, timeout=120)
        self.assertNotEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"cannot write the event file {events}: it is a symlink", proc.stderr)
        self.assertEqual(open(target).read(), "keep me\n")

    def test_a_new_file_takes_the_umask_and_a_replaced_one_keeps_its_mode(self):
        new, kept = os.path.join(self.d, "new.csv"), os.path.join(self.d, "kept.csv")
        with open(kept, "w") as f:
            f.write("before\n")
        os.chmod(kept, 0o640)
        for path in (new, kept):
            subprocess.run([ct.CLI, "--db", self.db, "export", "runs", "-o", path], check=True,
                           preexec_fn=lambda: os.umask(0o077))
        self.assertEqual(stat.S_IMODE(os.stat(new).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(kept).st_mode), 0o640)
        self.assertTrue(open(kept).read().startswith("id,"))

    def test_a_device_or_a_pipe_is_written_to_as_a_stream(self):
        """/dev/null and a FIFO are not files to replace: renaming over /dev/null would make it a file."""
        ct.cli("--db", os.path.join(self.d, "s.db"), "run", "--quiet", *SMALL, "--summary", os.devnull, "--metrics",
               os.devnull)
        ct.cli("--db", self.db, "export", "runs", "-o", os.devnull)
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode), "/dev/null is no longer a device")
        fifo = os.path.join(self.d, "pipe")
        os.mkfifo(fifo)
        read = []
        reader = threading.Thread(target=lambda: read.append(open(fifo).read()), daemon=True)
        reader.start()
        ct.cli("--db", self.db, "export", "runs", "--format", "json", "-o", fifo)
        reader.join(timeout=60)
        self.assertEqual(len(json.loads(read[0])), 1)
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        self.assertEqual(self.leftovers(fifo), [])
        # /dev/stdout is whatever stdout is, a file here: written to, the link left as it is.
        for name in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
            redirected = os.path.join(self.d, "stdout.csv")
            with open(redirected, "w") as out:
                subprocess.run([ct.CLI, "--db", self.db, "export", "runs", "-o", name], stdout=out, check=True)
            self.assertTrue(open(redirected).read().startswith("id,"), name)
            self.assertTrue(os.path.islink("/dev/stdout"))
        self.assertEqual(glob.glob("/dev/stdout.tmp*") + glob.glob("/dev/null.tmp*"), [])

    def test_an_export_ended_by_a_signal_halfway_leaves_the_previous_file(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig.name):
                out = os.path.join(self.d, f"metrics-{sig.name}.csv")
                with open(out, "w") as f:
                    f.write("the previous export\n")
                proc = subprocess.Popen([ct.CLI, "--db", self.db, "export", "runs", "--metrics", "-o", out],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                deadline = time.monotonic() + 120
                # Halfway: the temporary file holds rows, the export is still writing.
                while time.monotonic() < deadline and proc.poll() is None:
                    partial = self.leftovers(out)
                    if partial and os.path.getsize(partial[0]) > 1 << 20:
                        break
                    time.sleep(0.005)
                self.assertIsNone(proc.poll(), "the export ended before it could be interrupted: make ROWS larger")
                proc.send_signal(sig)
                _, err = proc.communicate(timeout=60)
                self.assertEqual(proc.returncode, 128 + sig, err)
                self.assertEqual(open(out).read(), "the previous export\n")
                self.assertEqual(self.leftovers(out), [])

    def test_an_export_that_runs_out_of_room_leaves_no_file_and_says_why(self):
        out = os.path.join(self.d, "metrics.csv")
        args = [ct.CLI, "--db", self.db, "export", "runs", "--metrics", "-o", out]
        for before in (None, "the previous export\n"):
            with self.subTest(previous=before is not None):
                if before is not None:
                    with open(out, "w") as f:
                        f.write(before)
                proc = subprocess.run(args, capture_output=True, text=True, timeout=300,
                                      preexec_fn=limited_file_size(1 << 20))
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn(f"cannot write {out}: File too large", proc.stderr)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
                if before is None:
                    self.assertFalse(os.path.exists(out))
                else:
                    self.assertEqual(open(out).read(), before)
                self.assertEqual(self.leftovers(out), [])
        # With room, the same command writes every row.
        ct.cli("--db", self.db, "export", "runs", "--metrics", "-o", out)
        self.assertEqual(sum(1 for _ in open(out)), self.rows + 1)


if __name__ == "__main__":
    unittest.main()

"""Bad input, as a hostile but fair user gives it: every case ends within
seconds with the documented exit code (2: usage or configuration) and one
clear line that names the field or the file, never a backtrace, a hang or
an unbounded allocation. Also: a local run opens no port beyond loopback,
and text from the store cannot drive the terminal."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

EXIT_USAGE = 2


def idx(path, dims, payload):
    """An idx-ubyte file: magic 0x0000080<rank>, the dimensions, the bytes."""
    with open(path, "wb") as f:
        f.write(struct.pack(">I", 0x800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload)


def mnist(folder, images_dims=(4, 2, 2), labels=(1, 2, 3, 4), image_bytes=None):
    os.makedirs(folder, exist_ok=True)
    count = 1
    for d in images_dims:
        count *= d
    idx(os.path.join(folder, "train-images-idx3-ubyte"), images_dims,
        bytes(min(count, 1 << 20)) if image_bytes is None else image_bytes)
    idx(os.path.join(folder, "train-labels-idx1-ubyte"), (len(labels),), bytes(labels))


class BadInput(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.dir])

    def refused(self, args, *words, code=EXIT_USAGE, timeout=60):
        started = time.monotonic()
        proc = subprocess.run([ct.CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)
        took = time.monotonic() - started
        self.assertEqual(proc.returncode, code, proc.stderr)
        self.assertNotIn("frame #", proc.stderr)
        self.assertNotIn("Exception raised from", proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        self.assertLessEqual(len(lines), 2, proc.stderr)  # the error, and at most CLI11's hint
        for word in words:
            self.assertIn(word, proc.stderr)
        self.assertLess(took, timeout)
        return proc.stderr

    def run_refused(self, settings, *words):
        args = ["run", "--quiet", "--no-store", "--summary", os.path.join(self.dir, "s.json")]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        return self.refused(args + ["--set", "steps=3"], *words)

    # --- data files ---------------------------------------------------------------
    def test_mnist_label_out_of_range(self):
        mnist(self.dir, labels=(1, 200, 3, 4))
        self.run_refused({"data.name": "mnist", "data.path": self.dir}, "data.path", "label 200")

    def test_mnist_header_with_a_zero_dimension(self):
        mnist(self.dir, images_dims=(64, 0, 0), image_bytes=b"")
        self.run_refused({"data.name": "mnist", "data.path": self.dir}, "data.path", "is 0")

    def test_mnist_header_whose_product_overflows(self):
        mnist(self.dir, images_dims=(1 << 22, 1 << 21, 1 << 21), image_bytes=bytes(16))
        self.run_refused({"data.name": "mnist", "data.path": self.dir}, "data.path", "more bytes than the file")

    def test_a_data_file_that_is_a_fifo(self):
        mnist(self.dir)
        images = os.path.join(self.dir, "train-images-idx3-ubyte")
        os.remove(images)
        os.mkfifo(images)
        self.run_refused({"data.name": "mnist", "data.path": self.dir}, "data.path", "not a regular file")

    def test_a_data_file_that_is_a_folder(self):
        mnist(self.dir)
        images = os.path.join(self.dir, "train-images-idx3-ubyte")
        os.remove(images)
        os.mkdir(images)
        self.run_refused({"data.name": "mnist", "data.path": self.dir}, "data.path", "is a folder")

    def test_weights_from_dev_zero(self):
        self.run_refused({"weights.init": "/dev/zero"}, "weights.init", "not a regular file")

    def test_a_torchscript_model_returning_a_scalar(self):
        path = ct.torchscript_model(self.dir, "self.fc(x).sum()")
        self.run_refused({"model.name": "torchscript", "model.path": path, "data.features": 32, "data.classes": 5},
                         "model", "shape []")

    # --- checkpoints ---------------------------------------------------------------
    def test_checkpoints_with_wrong_types_or_missing_keys(self):
        import shutil
        import torch  # this test runs under the reference interpreter: the files are changed as a user would
        folder = os.path.join(self.dir, "ck")
        small = {"model.hidden": 64}
        ct.cli("run", "--quiet", "--no-store", "--summary", os.path.join(self.dir, "s.json"), "--set", "steps=2",
               "--set", f"checkpoint.dir={folder}", *ct.overrides_to_args(small))
        good = os.path.join(folder, "step-000002")
        changes = {
            "version 'one'": lambda ck: ck.update(version="one"),
            "format 7": lambda ck: ck.update(format=7),
            "world_size 'two'": lambda ck: ck.update(world_size="two"),
            "no reducer": lambda ck: ck.pop("reducer"),
            "a parameter 'none'": lambda ck: ck["model"].update({"output.bias": "none"}),
            "no optimizer_state": lambda ck: ck.pop("optimizer_state"),
            "a parameter reshaped": lambda ck: ck["model"].update({"hidden.0.weight": torch.zeros(3)}),
            "a momentum buffer reshaped":
                lambda ck: ck["optimizer_state"]["output.bias"].update(momentum_buffer=torch.zeros(3)),
        }
        for at, (name, change) in enumerate(changes.items()):
            with self.subTest(change=name):
                step = os.path.join(self.dir, f"damaged-{at}")
                shutil.copytree(good, step)
                for rank in (0, 1):
                    path = os.path.join(step, f"rank-{rank}.pt")
                    ck = torch.load(path)
                    change(ck)
                    torch.save(ck, path)
                self.run_refused(dict(small, **{"checkpoint.resume": step}), "checkpoint.resume")

    # --- sweeps --------------------------------------------------------------------
    def test_a_sweep_of_a_million_trials_is_refused_before_it_is_planned(self):
        axes = [f"--axis=optimizer.{name}={','.join(str(v) for v in values)}" for name, values in
                [("lr", [0.01 * (i + 1) for i in range(10)]), ("momentum", [0.05 * i for i in range(10)]),
                 ("weight_decay", [1e-5 * i for i in range(10)]), ("dampening", [0.05 * i for i in range(10)])]]
        axes += ["--axis=seed=" + ",".join(map(str, range(10))), "--axis=data.batch_size=" +
                 ",".join(map(str, range(8, 18)))]
        for plan in (["--plan"], []):
            with self.subTest(plan=plan):
                self.refused(["sweep", *axes, *plan], "max_trials", "1000000 trials", timeout=20)

    def test_a_range_of_a_billion_points(self):
        spec = os.path.join(self.dir, "spec.json")
        json.dump({"axes": {"optimizer.lr": {"min": 0.001, "max": 0.1, "points": 1000000000}}}, open(spec, "w"))
        self.refused(["sweep", "--spec", spec, "--plan"], "max_trials", timeout=20)

    def test_seeds_beyond_the_largest_seed_are_refused_before_anything_is_stored(self):
        """seed 2^53 with --seeds 3 (seeds past 2^53) is refused, by --plan and by the sweep, before any trial
        is stored: trials the sweep could not parse would leave a sweep that could not be resumed. 2^53 + 1 is
        refused as out of range, for a TPE sweep's --seed and a run's seed, though as a double it would pass
        a range ending at 2^53."""
        top = 1 << 53
        for plan in (["--plan"], []):
            self.refused(["sweep", "--set", f"seed={top}", "--seeds", "3", "--axis", "optimizer.lr=0.1", *plan],
                         "seeds", f"reach seed {top + 2}", "largest seed")
        self.refused(["sweep", "--strategy", "tpe", "--trials", "2", "--seed", str(top + 1),
                      "--axis", "optimizer.lr=0.1,0.2", "--plan"], "seed", str(top + 1), "out of range")
        self.run_refused({"seed": top + 1}, "seed", "out of range")
        self.assertEqual(ct.query("SELECT count(*) FROM runs")[0][0] if os.path.exists(ct.store()) else 0, 0)

    # --- the command line -----------------------------------------------------------
    def test_a_rendezvous_host_that_reads_as_an_option_is_refused(self):
        run = ct.run_commtune(self.dir, {"steps": 2})
        for rendezvous in ("-x:1", "node-:29400", "a..b:29400"):
            self.refused(["export", "launch", "--run", str(run.summary["run_id"]), "--out",
                          os.path.join(self.dir, "launch"), "--rendezvous", rendezvous], "rendezvous", rendezvous)

    def test_predict_names_the_runs_it_cannot_measure(self):
        proc = ct.cli("run", "--quiet", "--set", "steps=3", "--set", "debug.fail_rank=1", check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        failed = ct.cli_json("list")[0]["id"]
        self.refused(["predict", failed], f"run {failed} failed", "nothing measured")
        self.refused(["recommend", failed, "--baseline", "999999"], "--baseline", "no run 999999")

    def test_counts_that_are_not_integers_are_refused(self):
        self.refused(["list", "--limit", "1e23"], "--limit", "1e23")

    def test_bad_stores(self):
        self.refused(["--db", self.dir, "list"], "is a folder")
        self.refused(["--db", "/dev/null", "list"], "not a regular file")
        self.refused(["--db", "", "list"], "wants a file path")

    def test_usage_errors_exit_2(self):
        self.refused(["frobnicate"], "frobnicate")
        self.refused(["recommend", "--sweep", "1", "--tolerance", "1000"], "tolerance")
        self.refused(["list", "--status", "bogus"], "bogus")
        self.refused(["list", "--param", "nosuch=1"], "nosuch")
        self.refused(["params", "nosuchsection"], "nosuchsection", "hook")
        self.refused(["run", "--summary", "/missing/s.json"], "/missing", "does not exist")

    def test_configurations_that_cannot_run_here(self):
        self.run_refused({"world_size": 64}, "world_size", "oversubscribe")
        self.run_refused({"debug.fail_rank": 5}, "debug.fail_rank", "0..1")
        self.run_refused({"backend": "nccl", "device": "cpu"}, "backend", "GPUs only")
        self.run_refused({"backend": "mpi"}, "backend", "auto, nccl, gloo")
        if not shutil.which("nvidia-smi"):
            self.run_refused({"backend": "nccl"}, "backend", "no CUDA device")
            # Each rank's config error, then a clean exit: no rank may die of SIGABRT on its way out (the issue
            # saw "terminate called ... std::system_error" after this error in 6 of 6 tries), and the store
            # keeps the run as failed, not killed.
            for _ in range(3):
                err = self.run_refused({"world_size": 2, "device": "cuda"}, "device", "no CUDA device")
                self.assertNotIn("terminate called", err)
                self.assertNotIn("SIGABRT", err)


class Exposure(unittest.TestCase):
    def setUp(self):
        ct.fresh_store()

    def test_a_local_run_listens_on_loopback_alone(self):
        with tempfile.TemporaryDirectory() as d:
            proc, metrics, _ = ct.start_commtune(d, {"steps": 10 ** 7})
            try:
                workers = ct.wait_until_training(proc, metrics, 2)
                for address in listening_addresses([proc.pid, *workers]):
                    self.assertTrue(address.startswith("127.") or address == "::1", address)
            finally:
                proc.kill()
                proc.wait()

    def test_the_socket_check_sees_a_port_open_to_the_network(self):
        import socket
        with socket.socket(socket.AF_INET6) as s6, socket.socket() as s4:
            s6.bind(("::", 0))
            s6.listen()
            s4.bind(("127.0.0.1", 0))
            s4.listen()
            found = listening_addresses([os.getpid()])
            self.assertEqual(sorted(found), sorted(["127.0.0.1", "0" * 32]))

    def test_names_with_control_characters_are_escaped(self):
        name = "red\x1b[31m\x07two\nlines"
        with tempfile.TemporaryDirectory() as d:
            ct.cli("run", "--quiet", "--summary", os.path.join(d, "s.json"), "--name", name, "--set", "steps=2")
        for args in (["list"], ["show", "1"]):
            out = ct.cli(*args).stdout
            self.assertNotIn("\x1b", out)
            self.assertNotIn("\x07", out)
            self.assertIn("red\\x1b[31m\\x07two\\nlines", out)


def listening_addresses(pids):
    """The local addresses of the TCP sockets these processes listen on."""
    inodes = set()
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(local.split(":")[0])
            if width == 8:
                out.append(".".join(str(b) for b in raw[::-1]))
            else:
                words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
                packed = b"".join(words)
                if packed[:12] == bytes(10) + b"\xff\xff":  # IPv4-mapped
                    out.append(".".join(str(b) for b in packed[12:]))
                else:
                    out.append("::1" if packed == bytes(15) + b"\x01" else packed.hex())
    return out


if __name__ == "__main__":
    unittest.main()

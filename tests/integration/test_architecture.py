"""The tuner apart from the engine (core/CMakeLists.txt): no file of the tuner, the CLI, the desktop
app or the store includes a torch header or an engine header, and none of their programs or
libraries loads libtorch. The CLI, the app and the tuner library are the built ones, read with
ldd (every library the loader would map, not only the direct ones)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

# The torch side's headers: libtorch's own, and the engine's.
FORBIDDEN = re.compile(r'^\s*#\s*include\s*[<"]((torch|ATen|c10|caffe2|cuda|nccl|kernels)/|core/engine/).*$', re.M)
TUNER_SOURCES = ["core/tuner", "db", "ui", "app/cli", "app/commtune_cli.cpp", "app/commtune_gui.cpp"]
TORCH_LIBRARY = re.compile(r"lib(torch|c10|cuda|cudart|nccl|nvrtc|cublas|cudnn|commtune_engine)[\w.-]*\.so")


def sources(top):
    path = os.path.join(ct.REPO, top)
    if os.path.isfile(path):
        yield path
        return
    for folder, _, files in os.walk(path):
        for name in files:
            if name.endswith((".h", ".cpp", ".in")):
                yield os.path.join(folder, name)


class TunerApart(unittest.TestCase):
    def test_no_tuner_file_includes_a_torch_or_engine_header(self):
        found = []
        for top in TUNER_SOURCES:
            for path in sources(top):
                with open(path, encoding="utf-8") as f:
                    for match in FORBIDDEN.finditer(f.read()):
                        found.append(f"{os.path.relpath(path, ct.REPO)}: {match.group(0).strip()}")
        self.assertEqual(found, [], "the tuner's files include the engine's side")
        # The check sees an include when there is one (a test that could not fail would prove nothing).
        self.assertTrue(FORBIDDEN.search('#include <ATen/ATen.h>\n') and FORBIDDEN.search('#include "core/engine/catalog.h"'))

    def test_no_tuner_program_loads_libtorch(self):
        programs = [ct.CLI, os.path.join(ct.BUILD, "core", "tuner", "libcommtune_tuner.so")]
        gui = os.path.join(ct.BUILD, "app", "commtune")
        if os.path.exists(gui):
            programs.append(gui)
        for program in programs:
            with self.subTest(program=os.path.relpath(program, ct.BUILD)):
                loaded = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
                self.assertIn("libcommtune_tuner.so" if "commtune_tuner" not in program else "libsqlite3", loaded)
                self.assertEqual(TORCH_LIBRARY.findall(loaded), [], loaded)
        worker = subprocess.run(["ldd", ct.WORKER], capture_output=True, text=True, check=True).stdout
        self.assertTrue(TORCH_LIBRARY.search(worker), "the worker is the one that loads libtorch")

    def test_the_cli_asks_the_worker_once_then_reads_its_cache(self):
        """The components' schema comes from the engine (`commtune-worker --describe`) and is kept
        while the worker is the same file: a second process reads it from the cache, and a worker
        that is replaced is asked again."""
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "XDG_CACHE_HOME": tmp}
            first = subprocess.run([ct.CLI, "params", "--json"], env=env, capture_output=True, text=True, check=True)
            cached = [f for f in os.listdir(os.path.join(tmp, "commtune")) if f.startswith("engine-")]
            self.assertEqual(len(cached), 1)
            # A cache that lies is believed while the files it names are unchanged: proof it is read.
            path = os.path.join(tmp, "commtune", cached[0])
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace("average gradients over all ranks", "AVERAGE FROM THE CACHE"))
            second = subprocess.run([ct.CLI, "params", "--json"], env=env, capture_output=True, text=True, check=True)
            self.assertIn("AVERAGE FROM THE CACHE", second.stdout)
            # A worker that is another file (a rebuild) is asked again.
            os.utime(ct.WORKER)
            third = subprocess.run([ct.CLI, "params", "--json"], env=env, capture_output=True, text=True, check=True)
            self.assertNotIn("AVERAGE FROM THE CACHE", third.stdout)
            self.assertEqual(third.stdout, first.stdout)

    def test_a_missing_worker_is_named_in_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "XDG_CACHE_HOME": tmp, "COMMTUNE_WORKER": os.path.join(tmp, "no-worker")}
            out = subprocess.run([ct.CLI, "params"], env=env, capture_output=True, text=True)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("no-worker", out.stderr)
            self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)


if __name__ == "__main__":
    unittest.main()

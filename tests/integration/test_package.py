"""The Debian package and the install tree: `cpack -G DEB` builds a package
whose Depends name the Debian runtime packages, and commtune runs from the
package's files unpacked into a scratch root (its --version, a 2-rank CPU
run, the example plugin), so a file missing from the package fails here."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402


class Package(unittest.TestCase):
    def test_the_package_installs_and_runs(self):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["cpack", "-G", "DEB", "-B", d], cwd=ct.BUILD, check=True, capture_output=True, timeout=600)
            [deb] = [f for f in os.listdir(d) if f.endswith(".deb")]
            info = subprocess.run(["dpkg-deb", "-I", os.path.join(d, deb)], capture_output=True, text=True,
                                  check=True).stdout
            depends = next(line for line in info.splitlines() if line.strip().startswith("Depends:"))
            for package in ("libtorch1.13", "libsqlite3-0"):
                self.assertIn(package, depends)
            root = os.path.join(d, "root")
            subprocess.run(["dpkg-deb", "-x", os.path.join(d, deb), root], check=True)
            cli = os.path.join(root, "usr", "bin", "commtune-cli")
            env = dict(os.environ, HOME=os.path.join(d, "home"))
            env.pop("COMMTUNE_PLUGIN_PATH", None)
            version = subprocess.run([cli, "--version"], capture_output=True, text=True, env=env, check=True).stdout
            self.assertIn("commtune ", version)
            self.assertIn("libtorch 1.13", version)
            self.assertIn("NCCL:", version)
            plugins = subprocess.run([cli, "plugins"], capture_output=True, text=True, env=env, check=True).stdout
            self.assertIn("adds hook threshold_sparsify", plugins)
            run = subprocess.run([cli, "run", "-q", "--no-store", "--summary", os.path.join(d, "s.json"),
                                  "--set", "world_size=2", "--set", "steps=5", "--set", "hook.name=threshold_sparsify"],
                                 capture_output=True, text=True, env=env, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("succeeded: 5/5", run.stderr)
            self.assertTrue(os.path.exists(os.path.join(root, "usr", "include", "commtune", "plugins",
                                                        "commtune_plugin.h")))


if __name__ == "__main__":
    unittest.main()

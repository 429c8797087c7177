"""The Debian package and the install tree: scripts/package.sh builds, with
Debian's libtorch 1.13, a package whose Depends name the Debian runtime
packages, and commtune runs from the package's files unpacked into a scratch
root (its --version, a 2-rank CPU run, the example plugin), so a file missing
from the package fails here. The main build (PyPI's PyTorch 2.11) installs
to a prefix and runs from there."""
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
            packed = subprocess.run([os.path.join(ct.REPO, "scripts", "package.sh")], capture_output=True, text=True,
                                    timeout=1800)
            self.assertEqual(packed.returncode, 0, packed.stdout[-3000:] + packed.stderr[-3000:])
            deb = packed.stdout.split()[-1]
            info = subprocess.run(["dpkg-deb", "-I", deb], capture_output=True, text=True, check=True).stdout
            depends = next(line for line in info.splitlines() if line.strip().startswith("Depends:"))
            for package in ("libtorch1.13", "libsqlite3-0", "libqt6widgets6", "libqcustomplot2.1-qt6"):
                self.assertIn(package, depends)
            root = os.path.join(d, "root")
            subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
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
            # The users' Python package, where Debian's python3 looks, imports and is a no-op outside a trial;
            # the README's topic pages beside it.
            site = os.path.join(root, "usr", "lib", "python3", "dist-packages")
            probe = subprocess.run([ct.ORACLE_PYTHON, "-c",
                                    "import commtune; print(commtune.__file__, commtune.in_trial())"],
                                   capture_output=True, text=True, env=dict(env, PYTHONPATH=site), check=True).stdout
            self.assertEqual(probe.split(), [os.path.join(site, "commtune", "__init__.py"), "False"])
            self.assertTrue(os.path.exists(os.path.join(root, "usr", "share", "doc", "commtune", "docs", "install.md")))
            check_desktop_integration(self, os.path.join(root, "usr"), env)

    def test_cmake_install_to_a_prefix(self):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["cmake", "--install", ct.BUILD, "--prefix", d], check=True, capture_output=True,
                           timeout=300)
            env = dict(os.environ, HOME=os.path.join(d, "home"))
            for binary in ("commtune-cli", "commtune"):
                out = subprocess.run([os.path.join(d, "bin", binary), "--version"], capture_output=True, text=True,
                                     env=env, timeout=60)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn(f"libtorch {ct.reference_torch_version()}", out.stdout)
            check_desktop_integration(self, d, env)


def check_desktop_integration(test, prefix, env):
    """The GUI binary, its .desktop entry, icon and AppStream metainfo are installed, valid and agree, and the
    installed app starts (offscreen) and keeps running."""
    app_id = "org.commtune.Commtune"
    desktop = os.path.join(prefix, "share", "applications", app_id + ".desktop")
    metainfo = os.path.join(prefix, "share", "metainfo", app_id + ".metainfo.xml")
    icon = os.path.join(prefix, "share", "icons", "hicolor", "scalable", "apps", app_id + ".svg")
    subprocess.run(["desktop-file-validate", desktop], check=True)
    subprocess.run(["appstreamcli", "validate", "--no-net", metainfo], check=True, capture_output=True)
    with open(desktop) as f:
        entry = dict(line.strip().split("=", 1) for line in f if "=" in line)
    test.assertEqual(entry["Icon"], app_id)
    test.assertTrue(os.path.exists(icon))
    with open(metainfo) as f:
        text = f.read()
    test.assertIn(f"<launchable type=\"desktop-id\">{app_id}.desktop</launchable>", text)
    test.assertNotIn("@PROJECT_VERSION@", text)
    gui = os.path.join(prefix, "bin", entry["Exec"].split()[0])
    app = subprocess.Popen([gui, "--db", os.path.join(env["HOME"], "runs.db")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True,
                           env=dict(env, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=os.path.join(env["HOME"], "c")))
    try:
        app.wait(timeout=4)
        test.fail("the installed app exited: " + app.stderr.read())
    except subprocess.TimeoutExpired:
        pass  # still up
    finally:
        app.kill()
        app.wait()


if __name__ == "__main__":
    unittest.main()

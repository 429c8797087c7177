"""The desktop app binary as a user starts it: without a display it explains
how to go on and exits non-zero at once (never aborting in Qt, never
hanging); --version needs no display; scripts/screenshots.sh drives the real
window under Xvfb through a real sweep and writes a PNG per main view."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

GUI = os.path.join(ct.BUILD, "app", "commtune")
NO_DISPLAY_EXIT = 3


def start(args=(), **env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(env_changes)
    return subprocess.run([GUI, *args], env=env, capture_output=True, text=True, timeout=20)


class WithoutDisplay(unittest.TestCase):
    def test_no_display_says_what_to_do_and_exits(self):
        out = start()
        self.assertEqual(out.returncode, NO_DISPLAY_EXIT, out.stderr)
        self.assertIn("no display", out.stderr)
        self.assertIn("QT_QPA_PLATFORM=offscreen", out.stderr)
        self.assertIn("commtune-cli", out.stderr)

    def test_a_display_nobody_serves_is_refused_too(self):
        out = start(DISPLAY=":97")
        self.assertEqual(out.returncode, NO_DISPLAY_EXIT, out.stderr)
        self.assertIn("DISPLAY=:97", out.stderr)

    def test_version_needs_no_display(self):
        out = start(["--version"])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(f"libtorch {ct.reference_torch_version()}", out.stdout)
        self.assertIn("CUDA:", out.stdout)


class Screenshots(unittest.TestCase):
    def test_the_script_captures_each_main_view_under_xvfb(self):
        """The pictures of the README and docs/app.md come from docs/screenshots/sweep.json (30 trials and 2 baselines); the script is checked
        here with a sweep of the same kind and 5 short trials."""
        with tempfile.TemporaryDirectory() as d:
            spec = os.path.join(d, "sweep.json")
            with open(os.path.join(ct.REPO, "docs", "screenshots", "sweep.json")) as f:
                small = json.load(f)
            small["base"]["steps"] = 20
            small["axes"] = {"hook.matrix_approximation_rank": [1, 2], "optimizer.lr": [0.05, 0.1]}
            with open(spec, "w") as f:
                json.dump(small, f)
            out = subprocess.run([os.path.join(ct.REPO, "scripts", "screenshots.sh"), d, spec], capture_output=True,
                                 text=True, timeout=600, env=dict(os.environ, COMMTUNE_BUILD_DIR=ct.BUILD))
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            views = ("launch", "dashboard", "runs", "analysis", "slices", "parallel", "importance", "history", "scatter")
            # A 1080p screen and a laptop's, each in both themes.
            for size, suffix in (((1920, 1080), ""), ((1366, 768), "-1366")):
                for view in views:
                    for theme in ("", "-dark"):
                        with open(os.path.join(d, view + suffix + theme + ".png"), "rb") as f:
                            head = f.read(24)
                        self.assertEqual(head[1:4], b"PNG")
                        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
                        self.assertEqual((width, height), size, view + suffix + theme)


if __name__ == "__main__":
    unittest.main()

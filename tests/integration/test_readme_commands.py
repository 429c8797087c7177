"""Every shell command the README and docs/*.md show, run as written, in order,
one document at a time, each in a clean folder laid out like the repository's
root (build/, scripts/, tests/, python/ linked in), with a fresh run store and
the reference PyTorch's environment active (`python3` is its Python). Two strings are substituted, those a user
replaces with their own cluster's: /shared (a folder every node sees) becomes
a temporary folder, node0:29400 (a node's address) a free loopback port.
Commands shown "on every node" run twice at once, as two nodes. A document whose
scripts/slurm-local.sh cannot start SLURM here (exit status 77: not root) is
skipped from there on, saying why. A spec a
command reads (`--spec FILE`) is the document's one JSON block, written there
first. A command the docs add that this test cannot run fails it."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

# Commands a test cannot run here, and where they are checked instead.
RUN_ELSEWHERE = {
    "./scripts/test.sh": ".ci/run runs it (the suite cannot run itself)",
    "./scripts/package.sh && sudo apt install ./build-package/commtune_0.1.0_amd64.deb":
        "tests/integration/test_package.py builds the package and checks its contents (installing needs root "
        "and changes the machine)",
}
# What a document's commands leave behind, checked after they ran.
LEAVES = {
    "powersgd.md": ("export/use_powersgd.py", "continue/powersgd_state-rank1.pt"),
    "export.md": ("bf16-export/use_hook.py",),
    "exactness.md": ("reference.json",),
}
# Commands shown as run on each node of a job: two at once here.
ON_EVERY_NODE = ("launch_torchrun.sh", "torchrun --nnodes 2")


def documented_commands(text):
    """The commands of a document's ```sh blocks: continuation lines joined, comments dropped."""
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)
    commands = []
    for block in blocks:
        block = block.replace("\\\n", " ")
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read(path):
    with open(path) as f:
        return f.read()


class ReadmeCommands(unittest.TestCase):
    def run_document(self, text, root):
        """Runs the document's commands in `root`, in order; returns the store's path."""
        commands = documented_commands(text)
        for name in ("scripts", "tests", "python"):
            os.symlink(os.path.join(ct.REPO, name), os.path.join(root, name))
        json_blocks = re.findall(r"^```json\n(.*?)^```", text, re.M | re.S)
        for spec in sorted({m for c in commands for m in re.findall(r"--spec (\S+)", c)}):
            self.assertEqual(len(json_blocks), 1, f"a command reads {spec}: the document must show it")
            with open(os.path.join(root, spec), "w") as f:
                f.write(json_blocks[0])
        shared = os.path.join(root, "shared-folder")
        rendezvous = f"127.0.0.1:{free_port()}"
        env = dict(os.environ, XDG_DATA_HOME=os.path.join(root, "data"), HOME=root)
        env.pop("COMMTUNE_DB", None)
        env.pop("COMMTUNE_BUILD_DIR", None)
        nodes = []
        try:
            for at, command in enumerate(commands):
                if command in RUN_ELSEWHERE:
                    continue
                literal = command.replace("/shared", shared).replace("node0:29400", rendezvous)
                if any(marker in command for marker in ON_EVERY_NODE):
                    nodes += [subprocess.Popen(["sh", "-c", literal], cwd=root, env=ct.documented_env(root, env),
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                               start_new_session=True) for _ in range(2)]
                    if at + 1 < len(commands) and "import --follow" in commands[at + 1]:
                        continue  # the import that follows them waits for the job
                    self.wait_nodes(nodes, command)
                    nodes = []
                    continue
                proc = ct.shell_as_documented(literal, root, env=env, timeout=900)
                if proc.returncode == 77 and command.startswith("./scripts/slurm-local.sh"):
                    self.skipTest(f"{command}: {proc.stderr.strip()}")  # no SLURM here (not root): the rest needs it
                self.assertEqual(proc.returncode, 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
                if nodes:
                    self.wait_nodes(nodes, command)
                    nodes = []
        finally:
            for node in nodes:
                if node.poll() is None:
                    os.killpg(node.pid, 9)
                node.wait()
        return os.path.join(root, "data", "commtune", "runs.db")

    def test_every_readme_command_runs_as_written(self):
        text = read(os.path.join(ct.REPO, "README.md"))
        self.assertGreater(len(documented_commands(text)), 6)
        with tempfile.TemporaryDirectory() as root:
            store = self.run_document(text, root)
            # What the tour left: the export it shows, which ran its own two-rank check.
            for path in ("powersgd-export/use_powersgd.py", "powersgd-export/powersgd_state.pt"):
                self.assertTrue(os.path.exists(os.path.join(root, path)), path)
            # The default job, the sweep's baseline and six trials, the script sweep's two baselines and two
            # trials, and the run on one's own tensors.
            listed = ct.cli_json("list", "--db", store)
            self.assertEqual([r["status"] for r in listed], ["succeeded"] * 13, [(r["id"], r["status"]) for r in listed])

    def test_every_command_in_docs_runs_as_written(self):
        documents = sorted(f for f in os.listdir(os.path.join(ct.REPO, "docs")) if f.endswith(".md"))
        ran = []
        for name in documents:
            text = read(os.path.join(ct.REPO, "docs", name))
            if not documented_commands(text):
                continue
            with self.subTest(document=name), tempfile.TemporaryDirectory() as root:
                store = self.run_document(text, root)
                for path in LEAVES.get(name, ()):
                    self.assertTrue(os.path.exists(os.path.join(root, path)), f"{name}: {path}")
                if name == "multinode.md":  # the two-node job, imported while it ran
                    listed = ct.cli_json("list", "--db", store)
                    self.assertTrue(any(r["world_size"] == 4 and r["status"] == "succeeded" for r in listed),
                                    [(r["id"], r["world_size"], r["status"]) for r in listed])
                ran.append(name)
        for name in ("sweeps.md", *LEAVES, "multinode.md"):
            self.assertIn(name, ran)

    def wait_nodes(self, nodes, after):
        for node in nodes:
            out, _ = node.communicate(timeout=900)
            self.assertEqual(node.returncode, 0, f"a node of the job (before: {after})\n{out[-3000:]}")


if __name__ == "__main__":
    unittest.main()

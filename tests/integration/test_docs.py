"""Documentation that is generated must match what the binaries say."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402

MARKER = "<!-- generated below: commtune-cli params --markdown -->\n\n"


class Docs(unittest.TestCase):
    def test_config_reference_is_current(self):
        with open(os.path.join(ct.REPO, "docs", "config.md")) as f:
            documented = f.read().split(MARKER, 1)[1]
        generated = subprocess.run([ct.CLI, "params", "--markdown"], capture_output=True, text=True, check=True).stdout
        self.assertEqual(documented, generated,
                         "docs/config.md is stale: regenerate the part below its marker with "
                         "`build/app/commtune-cli params --markdown`")

    def test_every_parameter_has_a_doc(self):
        import json
        schema = json.loads(subprocess.run([ct.CLI, "params", "--json"], capture_output=True, text=True,
                                           check=True).stdout)
        params = list(schema["root"])
        for section in schema["sections"]:
            params += section.get("params", []) + section.get("common", [])
            for entry in section.get("entries", []):
                params += entry["params"]
        self.assertGreater(len(params), 40)
        for p in params:
            self.assertGreater(len(p["doc"]), 10, p["name"])

    def test_the_readme_file_map_names_files_that_exist(self):
        """README's "where each concept lives" table: a reader who follows it finds the file."""
        import re
        import glob
        documents = [os.path.join(ct.REPO, "README.md"), *sorted(glob.glob(os.path.join(ct.REPO, "docs", "*.md")))]
        texts = [open(path).read() for path in documents]
        holding = [t for t in texts if "| concept | file |" in t]
        self.assertEqual(len(holding), 1, "one document holds the map")
        table = holding[0].split("| concept | file |", 1)[1].split("\n\n", 1)[0]
        paths = re.findall(r"`([a-z_]+/[^`]*)`", table)
        self.assertGreater(len(paths), 30)
        for path in paths:
            self.assertTrue(os.path.exists(os.path.join(ct.REPO, path)), path)
        # Every file of core/verdict is on the map: that is where the answers the CLI and the app share live.
        for name in os.listdir(os.path.join(ct.REPO, "core", "tuner", "verdict")):
            if name.endswith(".h"):
                self.assertIn("core/tuner/verdict/" + name, paths)

    def test_every_link_of_the_readme_and_docs_leads_to_a_file_and_heading_that_exist(self):
        """The README is short because its topics live in docs/: a link that leads nowhere loses a claim."""
        import re
        import glob

        def anchors(path):
            with open(path) as f:
                headings = re.findall(r"^#+ (.*)$", f.read(), re.M)
            return {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in headings}

        documents = [os.path.join(ct.REPO, "README.md"), *sorted(glob.glob(os.path.join(ct.REPO, "docs", "*.md")))]
        checked = 0
        for document in documents:
            with open(document) as f:
                text = re.sub(r"^```.*?^```", "", f.read(), flags=re.M | re.S)
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+://", target):
                    continue
                path, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(document), path)) if path else document
                self.assertTrue(os.path.exists(resolved), f"{os.path.relpath(document, ct.REPO)}: {target}")
                if anchor:
                    self.assertIn(anchor, anchors(resolved), f"{os.path.relpath(document, ct.REPO)}: {target}")
                checked += 1
        self.assertGreater(checked, 40)


if __name__ == "__main__":
    unittest.main()

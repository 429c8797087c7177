"""Users' own data and models as they bring them from PyTorch 2.11 or NumPy:
tensors written in one line (a folder of .npy files, a .safetensors file, a
torch.save dict) train, the same tensors alike in each form; a file whose
header lies, data the model cannot take, or a TorchScript file from a newer
PyTorch ends the run with exit status 2 and one line naming the file (or the
field) and what is wrong, read no further than the header says."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import commtune_testing as ct  # noqa: E402
import user_models  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

EXIT_USAGE = 2


class OwnFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_on(self, settings, steps=6, check=True):
        args = ["run", "--quiet", "--no-store", "--summary", os.path.join(self.dir, "s.json"),
                "--metrics", os.path.join(self.dir, "m.jsonl"), "--set", f"steps={steps}"]
        proc = ct.cli(*args, *ct.overrides_to_args(settings), check=check)
        return proc

    def refused(self, settings, *words):
        proc = self.run_on(settings, check=False)
        self.assertEqual(proc.returncode, EXIT_USAGE, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, proc.stderr)
        for word in words:
            self.assertIn(word, proc.stderr)
        self.assertNotIn("\\n", proc.stderr)  # no escaped newlines of a multi-line error
        return proc.stderr

    def losses(self):
        """Every rank's loss at every step, rank by rank."""
        with open(os.path.join(self.dir, "m.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        return [row["loss"] for row in sorted(rows, key=lambda row: (row["rank"], row["step"]))]

    def test_the_same_tensors_train_alike_from_each_form(self):
        x, y = user_models.labelled((200, 16), 4)
        losses = {}
        for kind, name in (("npy", "data"), ("safetensors", "data.safetensors"), ("torch", "data.pt")):
            path = user_models.write_tensors(kind, os.path.join(self.dir, name), x, y)
            self.run_on({"data.name": "tensors", "data.path": path, "model.hidden": 32})
            summary = json.load(open(os.path.join(self.dir, "s.json")))
            self.assertEqual(summary["dataset"], "inputs [16] in 4 classes")
            losses[kind] = self.losses()
        self.assertEqual(losses["npy"], losses["safetensors"])
        self.assertEqual(losses["npy"], losses["torch"])

    def test_token_sequences_train_a_language_model(self):
        x, y = user_models.token_sequences(samples=64, seq_len=16, vocab=32)
        path = user_models.write_tensors("safetensors", os.path.join(self.dir, "tokens.safetensors"), x, y)
        self.run_on({"data.name": "tensors", "data.path": path, "model.name": "transformer_lm",
                     "model.d_model": 32, "model.heads": 2, "model.layers": 1})
        summary = json.load(open(os.path.join(self.dir, "s.json")))
        self.assertEqual(summary["dataset"], "token sequences of length [16] over a vocabulary of 32")

    def test_only_the_rows_used_count_against_the_memory_limit(self):
        x, y = user_models.labelled((4000, 64), 3)  # 1 MB of inputs
        path = user_models.write_tensors("npy", os.path.join(self.dir, "data"), x, y)
        limit = {"data.name": "tensors", "data.path": path, "data.max_gib": 0.0002, "model.hidden": 16}  # 210 KB
        self.refused(limit, "data.max_gib", "x.npy", "needs 1024000 bytes")
        self.run_on(dict(limit, **{"data.limit": 500}))  # 128 KB of inputs, 4 KB of labels

    def test_headers_that_lie_are_refused_before_reading(self):
        folder = os.path.join(self.dir, "data")
        x, y = user_models.labelled((10, 4), 2)
        user_models.write_tensors("npy", folder, x, y)
        with open(os.path.join(folder, "x.npy"), "wb") as f:  # a header that claims a million rows
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (1000000, 4)})
            f.write(x.numpy().tobytes())
        self.refused({"data.name": "tensors", "data.path": folder}, "data.path", "x.npy", "holds 160 bytes",
                     "needs 16000000")

        path = user_models.write_tensors("safetensors", os.path.join(self.dir, "d.safetensors"), x, y)
        raw = bytearray(open(path, "rb").read())
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        header["x"]["data_offsets"][1] += 1 << 40
        text = json.dumps(header).encode()
        with open(path, "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text + raw[8 + n:])
        self.refused({"data.name": "tensors", "data.path": path}, "data.path", "tensor 'x'", "outside the file")

    def test_data_that_cannot_be_trained_on_says_why(self):
        x, y = user_models.labelled((20, 4), 3)
        cases = [
            ("mismatched counts", x, y[:10], ("differ in their number of samples", "[20, 4]", "[10]")),
            ("float labels", x, y.float(), ("cross-entropy on integer class labels",)),
            ("negative labels", x, y - 5, ("classes are counted from 0",)),
        ]
        for name, inputs, labels, words in cases:
            with self.subTest(name):
                path = user_models.write_tensors("torch", os.path.join(self.dir, f"{name}.pt"), inputs, labels)
                self.refused({"data.name": "tensors", "data.path": path}, "data.path", *words)
        one = os.path.join(self.dir, "x.npy")
        np.save(one, x.numpy())
        self.refused({"data.name": "tensors", "data.path": one}, "data.path", "put x.npy and y.npy in a folder")
        path = user_models.write_tensors("safetensors", os.path.join(self.dir, "named.safetensors"), x, y)
        self.refused({"data.name": "tensors", "data.path": path, "data.inputs": "images"}, "no tensor 'images'",
                     "it has: x, y")
        big_endian = os.path.join(self.dir, "be")
        os.makedirs(big_endian)
        np.save(os.path.join(big_endian, "x.npy"), x.numpy().astype(">f4"))
        np.save(os.path.join(big_endian, "y.npy"), y.numpy())
        self.refused({"data.name": "tensors", "data.path": big_endian}, "x.npy", "big-endian")

    def test_files_that_hold_no_trainable_data_name_the_file_the_tensor_and_what_is_allowed(self):
        from safetensors.torch import save_file
        x, y = user_models.labelled((16, 4), 3)
        zero = os.path.join(self.dir, "zero.safetensors")
        save_file({"x": torch.zeros(16, 0), "y": y}, zero)
        self.refused({"data.name": "tensors", "data.path": zero}, "data.path", zero, "'x' [16, 0]",
                     "the inputs hold no features")
        huge = os.path.join(self.dir, "huge.safetensors")
        save_file({"x": x, "y": torch.full((16,), 2 ** 40)}, huge)  # one output row per class: 140 TB
        self.refused({"data.name": "tensors", "data.path": huge}, "data.path", huge, "label 1099511627776 in 'y'",
                     "more classes than 16777216")
        quantized = os.path.join(self.dir, "q.pt")
        torch.save({"x": torch.quantize_per_tensor(x, 0.1, 0, torch.qint8), "y": y}, quantized)
        self.refused({"data.name": "tensors", "data.path": quantized}, "data.path", quantized + "['x']",
                     "quantized tensor (QInt8)", "t.dequantize()")
        legacy = os.path.join(self.dir, "legacy.pt")
        torch.save({"x": x, "y": y}, legacy, _use_new_zipfile_serialization=False)
        plain = os.path.join(self.dir, "plain.pkl")
        with open(plain, "wb") as f:
            import pickle
            pickle.dump({"x": x.numpy(), "y": y.numpy()}, f)
        for path in (legacy, plain):
            self.refused({"data.name": "tensors", "data.path": path}, "data.path", path, "is a pickle",
                         "torch.save of PyTorch 1.6 or later, or as .safetensors")
        # A .safetensors header 640 bytes long: its length's first bytes, 80 02, begin a pickle too.
        padded = os.path.join(self.dir, "padded.safetensors")
        save_file({"x": x, "y": y}, padded)
        raw = open(padded, "rb").read()
        n = int.from_bytes(raw[:8], "little")
        header = raw[8:8 + n].rstrip(b" ").ljust(640)
        with open(padded, "wb") as f:
            f.write((640).to_bytes(8, "little") + header + raw[8 + n:])
        self.assertEqual(open(padded, "rb").read(2), b"\x80\x02")
        self.run_on({"data.name": "tensors", "data.path": padded}, steps=2)

    def test_what_a_model_file_is_and_what_its_forward_raises_lead_its_error(self):
        x, y = user_models.labelled((64, 32), 5)
        data = user_models.write_tensors("torch", os.path.join(self.dir, "d.pt"), x, y)
        settings = {"model.name": "torchscript", "data.name": "tensors", "data.path": data}
        source = os.path.join(self.dir, "models.py")
        with open(source, "w") as f:  # torch.jit.script reads the source
            f.write("import torch\n"
                    "class Boom(torch.nn.Module):\n"
                    "    def __init__(self):\n"
                    "        super().__init__()\n"
                    "        self.fc = torch.nn.Linear(32, 5)\n"
                    "    def forward(self, x):\n"
                    "        if x.size(0) > 0:\n"
                    "            raise ValueError('boom from the user')\n"
                    "        return self.fc(x)\n"
                    "class Outputs(torch.nn.Module):\n"
                    "    def __init__(self):\n"
                    "        super().__init__()\n"
                    "        self.fc = torch.nn.Linear(32, 5)\n"
                    "    def forward(self, x):\n"
                    "        return {'logits': self.fc(x)}\n"
                    "import sys\n"
                    "torch.jit.script(Boom()).save(sys.argv[1])\n"
                    "torch.jit.trace(Outputs(), torch.randn(2, 32), strict=False).save(sys.argv[2])\n"
                    "program = torch.export.export(torch.nn.Linear(32, 5), (torch.randn(2, 32),))\n"
                    "torch.export.save(program, sys.argv[3])\n"
                    "torch.save(torch.nn.Linear(32, 5).state_dict(), sys.argv[4])\n")
        boom, outputs, program, weights = (os.path.join(self.dir, n) for n in ("boom.pt", "dict.pt", "p.pt2", "w.pt"))
        subprocess.run([ct.ORACLE_PYTHON, source, boom, outputs, program, weights], check=True, capture_output=True)
        stderr = self.refused(dict(settings, **{"model.path": boom}), "model: the model's forward raised: boom from "
                              f"the user (ValueError raised at {source}, line 8, in forward), on a batch [32, 32]")
        self.assertNotIn("TorchScript interpreter", stderr)
        stderr = self.refused(dict(settings, **{"model.path": outputs}),
                              "model: the TorchScript model's forward returns Dict[str, Tensor], not one tensor of "
                              "logits")
        self.assertNotIn("cannot take a batch", stderr)
        self.refused(dict(settings, **{"model.path": program}), "model.path", program,
                     "is a torch.export ExportedProgram (.pt2), which cannot be trained from C++")
        self.refused(dict(settings, **{"model.path": weights}), "model.path", weights,
                     "is a torch.save file (weights or tensors), not a TorchScript module")

    def test_a_model_that_cannot_take_the_data_names_both_shapes(self):
        model = user_models.save_scripted(user_models.Mlp(features=32), os.path.join(self.dir, "mlp.pt"))
        x, y = user_models.labelled((64, 20), 5)
        data = user_models.write_tensors("torch", os.path.join(self.dir, "d.pt"), x, y)
        self.refused({"model.name": "torchscript", "model.path": model, "data.name": "tensors", "data.path": data},
                     "model:", "[32, 20]", "inputs [20] in 5 classes", "32x20 and 32x64")

    def test_zip_bombs_are_refused_from_their_directory_before_anything_is_inflated(self):
        """A 2 MB model or data file whose deflated entry inflates to 256 MiB (PyTorch compresses only small
        code entries; tensors are stored raw) is refused from its zip directory in one line naming the entry.
        Inflated whole by every rank, such a file would cost 4.3 GB and std::bad_alloc for a 2 GiB entry."""
        model = user_models.save_scripted(user_models.Mlp(), os.path.join(self.dir, "mlp.pt"))
        x, y = user_models.labelled((64, 32), 5)
        data = user_models.write_tensors("torch", os.path.join(self.dir, "d.pt"), x, y)

        def with_bomb(path, entry):
            bombed = path + ".bomb"
            with zipfile.ZipFile(path) as src, zipfile.ZipFile(bombed, "w") as out:
                prefix = src.namelist()[0].split("/")[0]
                for name in src.namelist():
                    out.writestr(src.getinfo(name), src.read(name))
                info = zipfile.ZipInfo(f"{prefix}/{entry}")
                info.compress_type = zipfile.ZIP_DEFLATED
                with out.open(info, "w", force_zip64=True) as f:
                    zeros = bytes(16 << 20)
                    for _ in range(16):
                        f.write(zeros)
            self.assertLess(os.path.getsize(bombed), 2 << 20)
            return bombed

        settings = {"model.name": "torchscript", "model.path": model, "data.name": "tensors", "data.path": data}
        self.run_on(settings)  # the files as PyTorch wrote them train
        bomb = with_bomb(model, "code/__torch__/bomb.py")
        self.refused(dict(settings, **{"model.path": bomb}), "model.path", bomb, "bomb.py: 268435456 from",
                     "not a file PyTorch wrote")
        bomb = with_bomb(data, "data/99")
        self.refused(dict(settings, **{"data.path": bomb}), "data.path", bomb, "data/99: 268435456 from")
        self.refused(dict(settings, **{"model.max_gib": 0.00001}), "model.max_gib", model,
                     "a model may take: raise model.max_gib")

    def test_a_torchscript_file_from_a_newer_pytorch_is_one_line(self):
        model = user_models.save_scripted(user_models.Mlp(), os.path.join(self.dir, "mlp.pt"))
        x, y = user_models.labelled((64, 32), 5)
        data = user_models.write_tensors("torch", os.path.join(self.dir, "d.pt"), x, y)
        settings = {"model.name": "torchscript", "data.name": "tensors", "data.path": data}

        newer_op = os.path.join(self.dir, "newer_op.pt")  # its code calls an operator this libtorch lacks
        newer_format = os.path.join(self.dir, "newer_format.pt")  # a file format version from the future
        with zipfile.ZipFile(model) as src, zipfile.ZipFile(newer_op, "w") as op, \
                zipfile.ZipFile(newer_format, "w") as fmt:
            for name in src.namelist():
                data_bytes = src.read(name)
                if name.endswith(".py"):
                    op.writestr(name, data_bytes.replace(b"torch.relu(", b"torch.relu_from_the_future("))
                else:
                    op.writestr(name, data_bytes)
                fmt.writestr(name, b"99\n" if name.endswith("/version") else data_bytes)
        self.refused(dict(settings, **{"model.path": newer_op}), "model.path", newer_op,
                     "aten::relu_from_the_future", "an operator this engine's libtorch")
        self.refused(dict(settings, **{"model.path": newer_format}), "model.path", newer_format, "99")


if __name__ == "__main__":
    unittest.main()

"""The step-time model against published numbers: BytePS's gradient
compression RFC (docs/gradient-compression.md in bytedance/byteps) trained
ResNet18_v2 on CIFAR-100 with 4 AWS p3.16xlarge (8 V100 each) at 25 Gbit/s,
and again with the links limited to 100 Mbit/s, for a baseline and for
onebit, randomk (k=8) and topk (k=1), all with error feedback and Nesterov
momentum. It reports end-to-end times only.

Compute cancels out of one ratio: topk (k=1) sends next to nothing, so its
time is the compute, and for a compressor X
    r(X) = (T_X - T_topk) / (T_baseline - T_topk)
is the share of the baseline's exposed communication that X still exposes.
This script measures commtune's own ResNet-18 (11.2M parameters, the same
hooks) on this machine for its buckets and bytes, predicts the 32-rank
cluster with --compute-ms for a V100, and prints r(X) predicted beside
published. docs/network-model.md keeps the table;
tests/integration/test_netmodel.py runs this at a smaller size.

  .venv/bin/python bench/netmodel_validation.py [--steps 8] [--batch 8] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.environ.get("COMMTUNE_BUILD_DIR", os.path.join(REPO, "build")), "app", "commtune-cli")
ORACLE_PYTHON = sys.executable  # the reference PyTorch: run this with .venv/bin/python

# End-to-end seconds from the RFC's tables.
PUBLISHED = {
    "25gbit": {"baseline": 703.15, "onebit": 629.42, "randomk": 502.00, "topk": 507.91},
    "100mbit": {"baseline": 518.32, "onebit": 195.24, "randomk": 89.67, "topk": 83.93},
}
HOOKS = {
    "baseline": ["hook.name=allreduce"],
    "onebit": ["hook.name=byteps", "hook.byteps_compressor_type=onebit"],
    "randomk": ["hook.name=byteps", "hook.byteps_compressor_type=randomk", "hook.byteps_compressor_k=8"],
    "topk": ["hook.name=byteps", "hook.byteps_compressor_type=topk", "hook.byteps_compressor_k=1"],
}
COMPRESSED = ["hook.byteps_ef_type=vanilla", "hook.byteps_momentum_type=nesterov", "optimizer.momentum=0"]
# A V100 on ResNet-18 at CIFAR size, 128 images: about 30 ms forward and backward
# (about 4,300 images/s); a third forward, two thirds backward.
V100_COMPUTE_MS = "10,20"

RESNET18 = '''
import sys, torch
import torch.nn as nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

class ResNet18(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        layers, cin = [], width
        for i, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            for j in range(2):
                layers.append(Block(cin, cout, 2 if (i > 0 and j == 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

torch.manual_seed(0)
model = ResNet18(int(sys.argv[2]), 100)
print(sum(p.numel() for p in model.parameters()))
torch.jit.script(model).save(sys.argv[1])
'''


def make_model(folder, width):
    path = os.path.join(folder, "resnet18.pt")
    script = os.path.join(folder, "resnet18.py")
    with open(script, "w") as f:
        f.write(RESNET18)
    out = subprocess.run([ORACLE_PYTHON, script, path, str(width)], check=True, capture_output=True, text=True)
    return path, int(out.stdout.split()[-1])


def cli(db, *args):
    return subprocess.run([CLI, "--db", db, *map(str, args)], check=True, capture_output=True, text=True)


def measure(folder, steps, batch, width):
    """Stores one run per hook of the ResNet-18 on this machine; returns (db, {hook: run id}, parameters)."""
    model, parameters = make_model(folder, width)
    db = os.path.join(folder, "runs.db")
    runs = {}
    for name, hook in HOOKS.items():
        settings = ["model.name=torchscript", f"model.path={model}", "data.name=synthetic_images", "data.size=32",
                    "data.classes=100", f"data.batch_size={batch}", f"steps={steps}", "world_size=2", *hook]
        if name != "baseline":
            settings += COMPRESSED
        args = ["run", "-q", "--summary", os.path.join(folder, name + ".json"), "--name", name]
        for s in settings:
            args += ["--set", s]
        runs[name] = int(cli(db, *args).stderr.rsplit("stored as run ", 1)[1].split()[0])
    return db, runs, parameters


def predict(db, runs, network, compute_ms=V100_COMPUTE_MS):
    """Predicted step seconds per hook on 4 nodes x 8 ranks."""
    out = json.loads(cli(db, "predict", *runs.values(), "--network", network, "--nodes", 4, "--gpus-per-node", 8,
                         "--compute-ms", compute_ms, "--json").stdout)
    by_run = {r["run_id"]: r["predictions"][0]["step_s"] for r in out["runs"]}
    return {name: by_run[run_id] for name, run_id in runs.items()}, out["compute"]


def exposed_share(times):
    """r(X) for onebit and randomk: their exposed communication as a share of the baseline's."""
    span = times["baseline"] - times["topk"]
    return {x: (times[x] - times["topk"]) / span for x in ("onebit", "randomk")}


def validate(steps=8, batch=8, width=64):
    with tempfile.TemporaryDirectory() as folder:
        db, runs, parameters = measure(folder, steps, batch, width)
        rows = []
        for network in ("25gbit", "100mbit"):
            predicted, compute = predict(db, runs, network)
            published = exposed_share(PUBLISHED[network])
            for x, share in exposed_share(predicted).items():
                rows.append({"network": network, "hook": x, "published_r": published[x], "predicted_r": share,
                             "predicted_ms": {k: 1e3 * v for k, v in predicted.items()}})
        return {"parameters": parameters, "compute": compute, "rows": rows}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = validate(args.steps, args.batch)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"ResNet-18, {result['parameters'] / 1e6:.2f}M parameters; 4 nodes x 8 ranks; {result['compute']}")
    print(f"{'network':9} {'hook':8} {'published r':>12} {'predicted r':>12}  predicted ms/step (baseline onebit "
          "randomk topk)")
    for r in result["rows"]:
        ms = r["predicted_ms"]
        print(f"{r['network']:9} {r['hook']:8} {r['published_r']:12.3f} {r['predicted_r']:12.3f}  "
              f"{ms['baseline']:.1f} {ms['onebit']:.1f} {ms['randomk']:.1f} {ms['topk']:.1f}")


if __name__ == "__main__":
    main()

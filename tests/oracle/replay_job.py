"""A PyTorch DDP job as a user writes it, replaying a commtune run of a TorchScript model on a
folder of x.npy and y.npy (docs/exactness.md, "Replaying a run in plain PyTorch"): a DataLoader over a
DistributedSampler, SGD, cross-entropy, under torchrun. It prints nothing; rank 0 writes every
rank's losses to --out as JSON.

  --own-loader-generator  give the DataLoader a generator of its own, so that starting each epoch's
                          iterator draws from it and not from the global generator dropout draws from
  --eager MODULE:CLASS    train that module (tests/support) with the TorchScript file's weights
                          instead of the file itself
"""
import argparse
import importlib
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--out", required=True)
    parser.add_argument("--own-loader-generator", action="store_true")
    parser.add_argument("--eager")
    args = parser.parse_args()

    torch.set_num_threads(1)  # commtune's threads for two ranks on two cores
    dist.init_process_group("gloo")
    model = torch.jit.load(args.model)
    if args.eager:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
        module, name = args.eager.split(":")
        eager = getattr(importlib.import_module(module), name)()
        eager.load_state_dict(model.state_dict())
        model = eager
    model.train()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)

    x = torch.from_numpy(np.load(os.path.join(args.data, "x.npy")))
    y = torch.from_numpy(np.load(os.path.join(args.data, "y.npy")))
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                        generator=torch.Generator() if args.own_loader_generator else None)
    torch.manual_seed(args.seed)  # the generator dropout draws from, as commtune seeds it

    losses = []
    epoch = 0
    while len(losses) < args.steps:
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            logits = ddp(inputs)
            loss = F.cross_entropy(logits.flatten(0, -2), targets.flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == args.steps:
                break
        epoch += 1

    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, losses)
    if dist.get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump(everyone, f)
    dist.barrier()
    os._exit(0)  # no teardown: Gloo's can abort after DDP's Python hooks ran (core/tuner/export/export_files.cpp)


if __name__ == "__main__":
    main()

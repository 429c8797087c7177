"""SlowMo (local SGD base) in float64, every rank simulated in one process:
the independent reference tests/oracle/test_slowmo.py compares commtune with.
It runs the formula as SlowMo's paper and fairscale state it, not commtune's
code: each rank steps on its own gradients; every localsgd_frequency steps
the parameters are averaged; every slowmo_frequency steps, after the exact
average, u = beta u + (x_old - x_avg) / lr; x_old -= alpha lr u; x = x_old,
with x_old starting at the initial parameters.

  slowmo_reference.py --config summary.json --init init.pt --final ref_final.pt
"""
import argparse
import json
import os
import sys

import torch
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import commtune_reference as ref  # noqa: E402


def replay(config, init):
    world, hook, opt_cfg = config["world_size"], config["hook"], config["optimizer"]
    assert opt_cfg["warmup_steps"] == 0 and hook["nprocs_per_node"] == 1
    x, y, spec = ref.make_dataset(config["data"], config["seed"])
    x = x.double() if x.is_floating_point() else x
    models, optimizers, samplers = [], [], []
    for rank in range(world):
        model = ref.make_model(config["model"], spec)
        model.load_state_dict(init, strict=True)
        model.double()
        models.append(model)
        optimizers.append(ref.make_optimizer(opt_cfg, model.parameters()))
        samplers.append(DistributedSampler(range(x.size(0)), num_replicas=world, rank=rank,
                                           shuffle=config["data"]["shuffle"], seed=config["seed"]))
    names = [n for n, _ in models[0].named_parameters()]
    slow = hook["slowmo_lr"] != 1.0 or hook["slowmo_momentum"] != 0.0
    old = {n: p.detach().clone() for n, p in models[0].named_parameters()}
    momentum = {n: torch.zeros_like(p) for n, p in old.items()}
    lr = opt_cfg["lr"]

    def average():
        with torch.no_grad():
            for n in names:
                params = [dict(m.named_parameters())[n] for m in models]
                mean = sum(p.detach() for p in params) / world
                for p in params:
                    p.copy_(mean)

    iterators = [iter(()) for _ in range(world)]
    epochs = [0] * world
    losses = [[] for _ in range(world)]
    for step in range(config["steps"]):
        for rank in range(world):
            batch = next(iterators[rank], None)
            if batch is None:
                samplers[rank].set_epoch(epochs[rank])
                epochs[rank] += 1
                iterators[rank] = ref.batches(samplers[rank], x, y, config["data"]["batch_size"],
                                              config["data"]["drop_last"])
                batch = next(iterators[rank])
            inputs, targets = batch
            loss = ref.loss_fn(models[rank](inputs), targets)
            optimizers[rank].zero_grad()
            loss.backward()
            optimizers[rank].step()
            losses[rank].append(loss.item())
        slow_step = slow and (step + 1) % hook["slowmo_frequency"] == 0
        if slow_step or (step + 1) % hook["localsgd_frequency"] == 0:
            average()
        if slow_step:
            with torch.no_grad():
                for n in names:
                    x_avg = dict(models[0].named_parameters())[n].detach()
                    momentum[n] = hook["slowmo_momentum"] * momentum[n] + (old[n] - x_avg) / lr
                    old[n] = old[n] - hook["slowmo_lr"] * lr * momentum[n]
                    for m in models:
                        dict(m.named_parameters())[n].copy_(old[n])
    return {n: p.detach().float() for n, p in models[0].named_parameters()}, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a commtune run summary (its config is replayed)")
    parser.add_argument("--init", required=True, help="initial weights (weights.save_initial)")
    parser.add_argument("--final", required=True, help="write rank 0's final parameters here")
    parser.add_argument("--losses", help="write every rank's losses here (JSON)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = json.load(open(args.config))["config"]
    final, losses = replay(config, torch.load(args.init))
    torch.save(final, args.final)
    if args.losses:
        json.dump(losses, open(args.losses, "w"))


if __name__ == "__main__":
    main()

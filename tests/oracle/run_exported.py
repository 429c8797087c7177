"""Runs a Python file that `commtune-cli export` wrote, unmodified, in a
two-rank PyTorch job on Gloo started as torchrun starts its workers (RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT): make_ddp(model), register(),
six training steps (with the averager after each optimizer step when
register returns one). Writes rank 0's losses as JSON. With --nccl, on GPUs
over NCCL instead (as many ranks as GPUs, at most 2: scripts/gpu-check.sh).

    /usr/bin/python3 run_exported.py EXPORTED.py OUT.json [--nccl]
"""
import importlib.util
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, port, path, out, nccl):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank) if nccl else torch.device("cpu")
    if nccl:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if nccl else "gloo")
    spec = importlib.util.spec_from_file_location("exported", path)
    exported = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exported)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(device)
    ddp = exported.make_ddp(model)
    averager = None
    if hasattr(exported, "load_powersgd_state"):
        state, _ = exported.load_powersgd_state(os.path.join(os.path.dirname(path), "powersgd_state.pt"))
        exported.register(ddp, state)
    else:
        averager = exported.register(ddp)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(6):
        x = torch.randn(8, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (8,), generator=generator).to(device)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if averager is not None:
            averager.average_parameters(ddp.parameters())
        losses.append(loss.item())
    if rank == 0:
        with open(out, "w") as f:
            json.dump(losses, f)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # PyTorch 1.13 may hang tearing down Gloo threads that ran Python hooks


def main():
    path, out = sys.argv[1], sys.argv[2]
    nccl = "--nccl" in sys.argv[3:]
    world = min(2, torch.cuda.device_count()) if nccl else 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    mp.spawn(rank_main, args=(world, port, path, out, nccl), nprocs=world, join=True)


if __name__ == "__main__":
    main()

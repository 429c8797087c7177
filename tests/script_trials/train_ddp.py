"""A user's own DDP training script, as one writes it for torchrun, with commtune's two lines.
Prints each rank's losses as JSON on its last line. --direct HOOK registers PyTorch's hook by hand
instead of commtune.attach (the reference a trial must equal), --exported FILE an exported use_*.py's
register(); --plain leaves commtune out. The faults a trial must survive: --fail-at STEP (rank 1 raises),
--hang-at STEP (rank 1 stops answering), --exit-before-attach CODE, --no-attach (logs, never attaches)."""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--direct", choices=["powersgd", "fp16_compress", "post_local_sgd"])
parser.add_argument("--rank-r", type=int, default=2)
parser.add_argument("--start-iter", type=int, default=2)
parser.add_argument("--plain", action="store_true")
parser.add_argument("--exported", help="a use_*.py that commtune-cli export wrote: its register(ddp) instead")
parser.add_argument("--fail-at", type=int, default=-1)
parser.add_argument("--hang-at", type=int, default=-1)
parser.add_argument("--exit-before-attach", type=int)
parser.add_argument("--no-attach", action="store_true")
parser.add_argument("--tag", help="ignored: tells a test's processes from another's")
args = parser.parse_args()

if not args.plain:
    import commtune

dist.init_process_group("gloo")
if args.exit_before_attach is not None:
    sys.stderr.write("train_ddp.py: cannot open the dataset (--exit-before-attach)\n")
    sys.exit(args.exit_before_attach)
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
ddp = DistributedDataParallel(model)
if args.direct == "powersgd":
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=args.rank_r,
                                        start_powerSGD_iter=args.start_iter)
    ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
elif args.direct == "fp16_compress":
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
elif args.direct == "post_local_sgd":
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook
    from torch.distributed.algorithms.model_averaging import averagers
    subgroup, _ = dist.new_subgroups(group_size=2)
    state = post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=subgroup, start_localSGD_iter=4)
    ddp.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)
    averager = averagers.PeriodicModelAverager(period=3, warmup_steps=0)
    optimizer.register_step_post_hook(lambda *_: averager.average_parameters(ddp.parameters()))
elif args.exported:
    import importlib.util
    spec = importlib.util.spec_from_file_location("exported", args.exported)
    exported = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exported)
    if hasattr(exported, "load_powersgd_state"):  # use_powersgd.py: the state file beside it, then the hook
        state, _ = exported.load_powersgd_state(os.path.join(os.path.dirname(args.exported), "powersgd_state.pt"))
        exported.register(ddp, state)
    else:  # use_byteps.py: the hook and its state at once, the learning rate followed
        exported.register(ddp).follow(optimizer)
elif not args.plain and not args.no_attach:
    ddp = commtune.attach(ddp, optimizer)

generator = torch.Generator().manual_seed(1 + dist.get_rank())
losses = []
began = time.perf_counter()
for step in range(args.steps):
    if dist.get_rank() == 1 and step == args.fail_at:
        raise ValueError(f"the batch at step {step} is corrupt (--fail-at)")
    if dist.get_rank() == 1 and step == args.hang_at:
        time.sleep(3600)
    x = torch.randn(16, 32, generator=generator)
    y = torch.randint(0, 4, (16,), generator=generator)
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(ddp(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    if not args.plain and not args.direct and not args.exported:
        commtune.log(loss)
seconds = time.perf_counter() - began
sys.stdout.write(json.dumps({"rank": dist.get_rank(), "losses": losses}) + "\n")  # one write: ranks share stdout
sys.stdout.write(json.dumps({"rank": dist.get_rank(), "loop_seconds": seconds}) + "\n")
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()

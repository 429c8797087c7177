"""A user's own DDP training script, as one writes it for torchrun, with commtune's two lines: its own
model class, dataset and DataLoader with a DistributedSampler, loss, learning-rate schedule and loop.
Prints each rank's losses as JSON on its last line. --direct HOOK registers PyTorch's hook by hand instead
of commtune.attach (the reference a trial must equal), --exported FILE an exported use_*.py's register();
--plain leaves commtune out; --save-for-engine DIR writes the model and data for an engine run of the
same job. The faults a trial must survive: --fail-at STEP (rank 1 raises), --hang-at STEP (rank 1 stops
answering), --exit-before-attach CODE, --no-attach (logs, never attaches), --exit-after-loop CODE (rank 0
fails after its last step: a final save that failed), --abort-after-loop (rank 0 ends as PyTorch's Gloo
teardown can abort a rank after Python hooks: that line on stderr, then SIGABRT, before any exit handler)."""
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
parser.add_argument("--warmup", type=int, default=4, help="steps of linear learning-rate warm-up")
parser.add_argument("--batch", type=int, default=16, help="samples per rank and step")
parser.add_argument("--hidden", type=int, default=64, help="units in each hidden layer")
parser.add_argument("--label-smoothing", type=float, default=0.1)
parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
parser.add_argument("--save-for-engine", help="write the model (TorchScript) and data (tensors) to this folder, then exit")
parser.add_argument("--direct", choices=["powersgd", "fp16_compress", "post_local_sgd"])
parser.add_argument("--rank-r", type=int, default=2)
parser.add_argument("--start-iter", type=int, default=2)
parser.add_argument("--plain", action="store_true")
parser.add_argument("--exported", help="a use_*.py that commtune-cli export wrote: its register(ddp) instead")
parser.add_argument("--fail-at", type=int, default=-1)
parser.add_argument("--hang-at", type=int, default=-1)
parser.add_argument("--exit-before-attach", type=int)
parser.add_argument("--no-attach", action="store_true")
parser.add_argument("--exit-after-loop", type=int)
parser.add_argument("--abort-after-loop", action="store_true")
parser.add_argument("--tag", help="ignored: tells a test's processes from another's")
args = parser.parse_args()

if not args.plain:
    import commtune



class Classifier(torch.nn.Module):
    """Four classes from 32 features through two hidden layers of --hidden units."""

    def __init__(self, hidden):
        super().__init__()
        self.encode = torch.nn.Linear(32, hidden)
        self.mix = torch.nn.Linear(hidden, hidden)
        self.head = torch.nn.Linear(hidden, 4)

    def forward(self, x):
        return self.head(torch.relu(self.mix(torch.relu(self.encode(x)))))


class Blobs(torch.utils.data.Dataset):
    """Points around four centres, the same on every rank; DistributedSampler deals them out."""

    def __init__(self, size):
        generator = torch.Generator().manual_seed(1)
        self.labels = torch.randint(0, 4, (size,), generator=generator)
        centres = torch.randn(4, 32, generator=generator)
        self.points = centres[self.labels] + torch.randn(size, 32, generator=generator)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.points[i], self.labels[i]


torch.manual_seed(0)
torch.set_num_threads(1)
model = Classifier(args.hidden)
dataset = Blobs(2048)
if args.save_for_engine:  # the model as TorchScript and the data as tensors, for an engine run of the same job
    os.makedirs(args.save_for_engine, exist_ok=True)
    torch.jit.script(model).save(os.path.join(args.save_for_engine, "model.pt"))
    torch.save({"x": dataset.points, "y": dataset.labels}, os.path.join(args.save_for_engine, "data.pt"))
    sys.exit(0)

dist.init_process_group(args.backend)
# Ranks on one GPU share it (cuda:0 for both on a machine of one); on the CPU all share it.
device = torch.device(args.device if args.device == "cpu"
                      else f"cuda:{int(os.environ.get('LOCAL_RANK', 0)) % torch.cuda.device_count()}")
if args.exit_before_attach is not None:
    sys.stderr.write("train_ddp.py: cannot open the dataset (--exit-before-attach)\n")
    sys.exit(args.exit_before_attach)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
# Linear warm-up over the first steps, then constant: the learning rate a hook that follows it sees move.
schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / args.warmup))
criterion = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True, seed=0)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, sampler=sampler, drop_last=True)
ddp = DistributedDataParallel(model.to(device), device_ids=None if device.type == "cpu" else [device])
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



def batches():
    """The loader's batches, epoch after epoch, each epoch shuffled anew."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


losses = []
began = time.perf_counter()
for step, (x, y) in zip(range(args.steps), batches()):
    if dist.get_rank() == 1 and step == args.fail_at:
        raise ValueError(f"the batch at step {step} is corrupt (--fail-at)")
    if dist.get_rank() == 1 and step == args.hang_at:
        time.sleep(3600)
    optimizer.zero_grad()
    loss = criterion(ddp(x.to(device)), y.to(device))
    loss.backward()
    optimizer.step()
    schedule.step()
    losses.append(loss.item())
    if not args.plain and not args.direct and not args.exported:
        commtune.log(loss)
seconds = time.perf_counter() - began
rank = dist.get_rank()
sys.stdout.write(json.dumps({"rank": dist.get_rank(), "losses": losses}) + "\n")  # one write: ranks share stdout
sys.stdout.write(json.dumps({"rank": dist.get_rank(), "loop_seconds": seconds}) + "\n")
sys.stdout.flush()
if args.exported:
    exported.finish()  # as the exported file asks a production job to end (its docstring says why)
dist.barrier()
dist.destroy_process_group()
if args.exit_after_loop is not None and rank == 0:
    sys.stderr.write("train_ddp.py: cannot save the checkpoint (--exit-after-loop)\n")
    sys.exit(args.exit_after_loop)
if args.abort_after_loop and rank == 0:  # before any exit handler, as in destroy_process_group()
    sys.stderr.write("terminate called without an active exception\n")
    sys.stderr.flush()
    os.abort()


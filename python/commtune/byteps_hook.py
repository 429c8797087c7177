# BytePS's push, server stage and pull as a PyTorch DDP communication hook. It is the body of the
# exported use_byteps.py (compiled into the tuner by CMake; the file sets OPTIONS below it) and the
# hook a script trial registers (commtune.attach sets OPTIONS from the trial). Compression runs on
# the CPU, as BytePS's does.
import torch
import torch.distributed as dist

OPTIONS = {}  # the byteps_* settings by their commtune names, set before the hook's first call

MASK = (1 << 64) - 1


class XorShift128Plus:
    """randomk's generator: BytePS's xorshift128+ (common/compressor/utils.h)."""

    def __init__(self, s0, s1):
        self.s0, self.s1 = s0, s1

    @classmethod
    def bytepss(cls, seed):  # BytePS's set_seed: the same state on every worker and server
        return cls(seed, seed)

    @classmethod
    def seeded(cls, seed):  # commtune's stream of its own, without a seed (splitmix64, twice)
        out = []
        for _ in range(2):
            seed = (seed + 0x9E3779B97F4A7C15) & MASK
            z = seed
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
            out.append(z ^ (z >> 31))
        return cls(*out)

    def next(self):
        t, s = self.s0, self.s1
        self.s0 = s
        t = (t ^ (t << 23)) & MASK
        t ^= t >> 17
        t ^= s ^ (s >> 26)
        self.s1 = t
        return (t + s) & MASK


def resolve_k(factor, n):
    """k as BytePS computes it (impl/topk.cc): in float, of the bytes padded to 128."""
    factor = torch.tensor(factor, dtype=torch.float32)
    if factor.item() >= 1:
        return min(int(factor.item()), n)
    size = 4 * n
    aligned = size + (128 - size % 128) % 128
    k = int((factor * float(aligned) / 4.0).item())
    return min(max(k, 1), n)


class Codec:
    """One partition's compressor, with the byte layout commtune's payloads have."""

    def __init__(self, n, rng):
        self.n, self.rng, self.kind = n, rng, OPTIONS["byteps_compressor_type"]
        self.k = resolve_k(OPTIONS["byteps_compressor_k"], n)

    def payload_bytes(self):
        return 4 + 4 * ((self.n + 31) // 32) if self.kind == "onebit" else 8 * self.k

    def compress(self, x):
        """x: float32 on the CPU, n elements -> uint8 payload."""
        if self.kind == "onebit":
            scale = 1.0
            if OPTIONS["byteps_compressor_onebit_scaling"]:  # |x| summed in one double, in order
                scale = torch.cumsum(x.abs().double(), 0)[-1].item() / self.n
            signs = torch.zeros(4 * 8 * ((self.n + 31) // 32), dtype=torch.uint8)
            signs[: self.n] = (x < 0).to(torch.uint8)  # BytePS's test: -0 and NaN are positive
            packed = (signs.view(-1, 8) << torch.arange(8, dtype=torch.uint8)).sum(1, dtype=torch.uint8)
            return torch.cat([torch.tensor([scale], dtype=torch.float32).view(torch.uint8), packed])
        if self.kind == "topk":
            magnitude = x.abs()
            magnitude[torch.isnan(magnitude)] = float("inf")  # ranked first, as commtune ranks NaN
            threshold = torch.topk(magnitude, self.k, sorted=False).values.min()
            above = (magnitude > threshold).nonzero().flatten()
            ties = (magnitude == threshold).nonzero().flatten()[: self.k - above.numel()]  # to the lower index
            indices = torch.sort(torch.cat([above, ties])).values
        else:
            indices = torch.tensor([self.rng.next() % self.n for _ in range(self.k)], dtype=torch.int64)
        values = x[indices]
        if self.kind == "randomk" and OPTIONS["byteps_compressor_randomk_rescale"]:
            values = values * (float(self.n) / float(self.k))
        return torch.cat([indices.to(torch.int32).view(torch.uint8), values.view(torch.uint8)])

    def decode(self, payload):
        """The dense float32 vector a payload stands for."""
        if self.kind == "onebit":
            scale = payload[:4].view(torch.float32)
            bits = (payload[4:].unsqueeze(1) >> torch.arange(8, dtype=torch.uint8)) & 1
            negative = bits.flatten()[: self.n].bool()
            return torch.where(negative, -scale, scale)
        indices = payload[: 4 * self.k].view(torch.int32).long()
        values = payload[4 * self.k:].view(torch.float32)
        out = torch.zeros(self.n, dtype=torch.float32)
        if self.kind == "randomk" and OPTIONS["byteps_compressor_randomk_rescale"]:
            return out.index_add_(0, indices, values)  # every draw counts: unbiased
        out[indices] = values  # BytePS assigns: an index drawn twice is one element
        return out


class Chain:
    """A worker's (momentum, error feedback, compressor) or the server's (error feedback,
    compressor) for one partition, with the rounding BytePS's CPU reducer has."""

    def __init__(self, n, rng, momentum):
        self.codec = Codec(n, rng)
        self.momentum = torch.zeros(n) if momentum else None
        self.error = torch.zeros(n) if OPTIONS["byteps_ef_type"] == "vanilla" else None
        self.previous_lr = 0.0

    def compress(self, g, lr):
        """g: this step's float32 gradient (changed in place); returns the payload."""
        if self.momentum is not None:  # m = g + mu m; p = g + mu m
            mu = OPTIONS["byteps_momentum_mu"]
            self.momentum.mul_(mu).add_(g)
            g.add_(self.momentum * mu)
        if self.error is not None:  # p = g + (lr_prev / lr) e; e = p - D(C(p))
            if lr is not None and lr > 0:
                if self.previous_lr <= 0:
                    self.previous_lr = lr
                ratio = self.previous_lr / lr
                if torch.tensor(ratio, dtype=torch.float32).item() != 1.0:
                    self.error.mul_(ratio)
                self.previous_lr = lr
            g.add_(self.error)
            self.error.copy_(g)
        payload = self.codec.compress(g)
        if self.error is not None:
            self.error.sub_(self.codec.decode(payload))
        return payload


class BytePSState:
    """The hook's memories: per parameter partition, this rank's worker chain and the server's
    (which every rank keeps alike), and the NAG momentum of small parameters."""

    def __init__(self, ddp_model):
        module = ddp_model.module if hasattr(ddp_model, "module") else ddp_model
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        self.index = {id(p): (i, name) for i, (name, p) in enumerate(named)}
        self.numel = {name: p.numel() for name, p in named}
        self.workers, self.servers, self.nag = {}, {}, {}
        self.optimizer = None
        page = 4096
        self.partition = (OPTIONS["byteps_partition_bytes"] + page - 1) // page * page // 4

    def follow(self, optimizer):
        """Reads the learning rate of each step from `optimizer` (error feedback rescales by it)."""
        self.optimizer = optimizer

    def lr(self):
        return self.optimizer.param_groups[0]["lr"] if self.optimizer is not None else None

    def chains(self, index, name, part, n):
        key = (name, part)
        if key not in self.workers:
            seed = OPTIONS["byteps_seed"]
            stream = (index << 20) ^ part

            def rng(stream):
                if seed:
                    return XorShift128Plus.bytepss(seed)
                return XorShift128Plus.seeded((seed * 0x100000001B3 + stream) & MASK)
            rank = dist.get_rank()
            self.workers[key] = Chain(n, rng(((rank + 1) << 44) ^ stream), OPTIONS["byteps_momentum_type"] == "nesterov")
            self.servers[key] = Chain(n, rng(stream), False)
        return self.workers[key], self.servers[key]


def byteps_hook(state, bucket):
    """BytePS's push, server stage and pull for one bucket (see the module's docstring)."""
    world = dist.get_world_size()
    buffer = bucket.buffer()
    host = buffer.detach().to("cpu", torch.float32, copy=True)
    host.mul_(1.0 / world)  # BytePS's push sums: each worker sends its share of the mean
    lr = state.lr()
    plain, pieces, offset = [], [], 0
    for p, grad in zip(bucket.parameters(), bucket.gradients()):
        index, name = state.index[id(p)]
        n = grad.numel()
        if 4 * n < OPTIONS["byteps_min_compress_bytes"]:
            plain.append((offset, n))
        else:
            for part, first in enumerate(range(0, n, state.partition)):
                size = min(state.partition, n - first)
                pieces.append((offset + first, size) + state.chains(index, name, part, size))
        offset += n
    message = [host[o:o + n].view(torch.uint8) for o, n in plain]
    message += [worker.compress(host[o:o + n], lr) for o, n, worker, _ in pieces]
    outgoing = torch.cat(message) if message else torch.zeros(0, dtype=torch.uint8)
    gathered = [torch.empty_like(outgoing) for _ in range(world)]
    if dist.get_backend() == "nccl":
        outgoing = outgoing.to(buffer.device)
        gathered = [g.to(buffer.device) for g in gathered]
    dist.all_gather(gathered, outgoing)
    gathered = [g.cpu() for g in gathered]
    # The server stage, alike on every rank: pushes decoded and summed in rank order, the sum
    # compressed again with the server's error feedback; then each rank decodes that pull.
    at = 0
    for o, n in plain:
        total = gathered[0][at:at + 4 * n].view(torch.float32).clone()
        for g in gathered[1:]:
            total += g[at:at + 4 * n].view(torch.float32)
        host[o:o + n] = total
        at += 4 * n
    for o, n, worker, server in pieces:
        width = worker.codec.payload_bytes()
        total = server.codec.decode(gathered[0][at:at + width])
        for g in gathered[1:]:
            total += server.codec.decode(g[at:at + width])
        host[o:o + n] = worker.codec.decode(server.compress(total, lr))
        at += width
    if OPTIONS["byteps_momentum_type"] == "nesterov":  # BytePS's MXNet NagAdapter, after the pull
        mu, offset = OPTIONS["byteps_momentum_mu"], 0
        for p, grad in zip(bucket.parameters(), bucket.gradients()):
            n = grad.numel()
            if n < OPTIONS["byteps_min_compress_bytes"]:  # elements against bytes, as BytePS compares them
                name = state.index[id(p)][1]
                m = state.nag.setdefault(name, torch.zeros(n))
                m.add_(host[offset:offset + n]).mul_(mu)
                host[offset:offset + n] += m
            offset += n
    buffer.copy_(host)
    fut = torch.futures.Future()
    fut.set_result(buffer)
    return fut


def register(ddp_model):
    """Registers the BytePS hook on `ddp_model`; returns its state. Call state.follow(optimizer)
    once the optimizer exists when the learning rate changes during training (error feedback
    rescales by it); with a constant rate it is not needed."""
    state = BytePSState(ddp_model)
    ddp_model.register_comm_hook(state, byteps_hook)
    return state


def load_hook_memories(state, path):
    """This rank's hook memories from a commtune checkpoint file (step-NNNNNN/rank-R.pt), so the
    job continues the run exactly: each partition's worker and server memories and generator,
    and the NAG momentum of small parameters."""
    ck = torch.load(path, weights_only=True)
    names = ck["parameter_names"]
    for key, blob in ck["hook"]["byteps_memories"].items():
        role, *where = key.split("/")
        name = names[int(where[0])]
        if role == "nag":
            state.nag[name] = blob.view(torch.float32).clone()
            continue
        part = int(where[1])
        index = names.index(name)
        n = min(state.partition, state.numel[name] - part * state.partition)
        worker, server = state.chains(index, name, part, n)
        chain = worker if role == "worker" else server
        at = 0
        if chain.codec.kind != "onebit":  # topk and randomk save their generator first
            s0, s1 = blob[:16].view(torch.int64).tolist()
            chain.codec.rng = XorShift128Plus(s0 & MASK, s1 & MASK)
            at = 16
        if chain.error is not None:
            chain.error = blob[at:at + 4 * n].view(torch.float32).clone()
            chain.previous_lr = blob[at + 4 * n:at + 4 * n + 8].clone().view(torch.float64).item()
            at += 4 * n + 8
        if chain.momentum is not None:
            chain.momentum = blob[at:at + 4 * n].view(torch.float32).clone()

"""An independent float64 implementation of PowerSGD, the reference for what
PyTorch 2.11 cannot run on CPU: the batched variant (its CPU path asserts)
and several buckets on Gloo (its hook aborts: gloo::EnforceNotMet, the ranks'
collectives out of step). PowerSGD under the fp16/bf16 wrappers, which 1.13
could not run on CPU either, is checked here too, and against PyTorch 2.11's
own hook in test_powersgd.py.

It replays a commtune run from its gradient dumps: at every step it takes
every rank's local gradients and reduces them bucket by bucket. Each step
can start from commtune's own state before that step (`start_from`: the
errors per rank and the warm-start Q, from the dump of the step before), so
the comparison of the step's result, new errors and new Q checks that
step's arithmetic alone: run on from its own state, a single half-precision
rounding that falls the other way compounds through error feedback and warm
start, and the comparison would measure the drift instead. Arithmetic is float64; where commtune keeps
a tensor in the bucket's half-precision dtype, the value is rounded to that
dtype (`store`): storage and communication in the bucket's dtype, and, as
ATen computes half-precision tensors (on GPUs, and on CPUs from PyTorch
2.x on: PowerSGD's own semantics there), every matrix product and every
step of the Gram-Schmidt orthogonalization rounded to it.
"""
import math

import numpy as np
import torch


class PowerSGDReference:
    def __init__(self, options, world_size, buckets, variant="powersgd", storage=torch.float32):
        """buckets: per bucket, the (name, shape) of its parameters in bucket order."""
        self.o = options
        self.world = world_size
        self.buckets = buckets
        self.variant = variant
        self.storage = storage
        self.half = storage in (torch.float16, torch.bfloat16)
        self.rng = np.random.RandomState(options["random_seed"])
        self.iter = 0
        self.errors = {}  # (rank, bucket) -> error
        self.q = {}  # bucket -> warm-start Q, flat, in commtune's layout

    def store(self, t):
        return t.to(self.storage).double() if self.half else t

    def reduce_sum(self, tensors):
        return self.store(sum(tensors))

    def orthogonalize(self, a, epsilon):
        """a: [batch, n, r] float64; Gram-Schmidt for r <= 2 or half storage (each op's result
        stored), else QR."""
        s = self.store
        if a.shape[2] <= 2 or self.half:
            a = a.clone()
            for i in range(a.shape[2]):
                norm = s(a[:, :, i:i + 1].norm(dim=1, keepdim=True))
                a[:, :, i:i + 1] = s(a[:, :, i:i + 1] / (s(norm + epsilon) if epsilon else norm))
                if i + 1 < a.shape[2]:
                    col = a[:, :, i:i + 1]
                    dots = s(s(col * a[:, :, i + 1:]).sum(dim=1, keepdim=True))
                    a[:, :, i + 1:] = s(a[:, :, i + 1:] - s(dots * col))
            return a
        return self.store(torch.linalg.qr(a)[0])

    def random_q(self, shapes):
        """PyTorch's draw: torch.manual_seed(rng.randint(1e9)), then torch.randn per shape, in order, in
        the bucket's dtype (a half-precision draw is not the float32 one rounded)."""
        g = torch.Generator().manual_seed(int(self.rng.randint(1_000_000_000)))
        return [torch.randn(*shape, generator=g, dtype=self.storage).double() for shape in shapes]

    def start_from(self, errors, q_memory):
        """errors: {(rank, bucket): tensor}, q_memory: {bucket: tensor}: commtune's state before the step."""
        self.errors = {key: self.store(t.double().reshape(-1)) for key, t in errors.items()}
        self.q = {b: self.store(t.double().reshape(-1)) for b, t in q_memory.items()}

    def step(self, local):
        """local: per rank, {name: float64 gradient}. Returns {name: reduced} (the same on every rank)."""
        out = {}
        for b, bucket in enumerate(self.buckets):
            inputs = [self.store(torch.cat([local[r][name].reshape(-1) for name, _ in bucket]))
                      for r in range(self.world)]
            if self.iter < self.o["start_powerSGD_iter"]:
                reduced = self.reduce_sum([self.store(x / self.world) for x in inputs])
            elif self.variant == "powersgd":
                reduced = self.layer_wise(b, bucket, inputs)
            else:
                reduced = self.batched(b, inputs)
            at = 0
            for name, shape in bucket:
                n = math.prod(shape)
                out[name] = reduced[at:at + n].view(shape)
                at += n
        if not self.o["warm_start"]:
            self.q.clear()
        self.iter += 1
        return out

    def with_error(self, b, inputs):
        if not self.o["use_error_feedback"]:
            return inputs
        return [self.store(x + self.errors.get((r, b), torch.zeros_like(x))) for r, x in enumerate(inputs)]

    def keep_error(self, b, inputs, reduced):
        if self.o["use_error_feedback"]:
            for r, x in enumerate(inputs):
                self.errors[(r, b)] = self.store(x - reduced)

    def layer_wise(self, b, bucket, inputs):
        inputs = self.with_error(b, inputs)
        rank = self.o["matrix_approximation_rank"]
        # Which tensors to compress, and their views as matrices per rank.
        pieces, at = [], 0
        for name, shape in bucket:
            n = math.prod(shape)
            rows, cols = shape[0], n // shape[0]
            r = min(rows, cols, rank)
            compress = (rows + cols) * r * self.o["min_compression_rate"] < rows * cols
            pieces.append((at, n, rows, cols, r, compress))
            at += n
        outputs = torch.empty_like(inputs[0])
        uncompressed = [p for p in pieces if not p[5]]
        if uncompressed:
            summed = self.reduce_sum([torch.cat([x[a:a + n] for a, n, *_ in uncompressed]) for x in inputs])
            mean = self.store(summed / self.world)
            k = 0
            for a, n, *_ in uncompressed:
                outputs[a:a + n] = mean[k:k + n]
                k += n
        # Matrices grouped by shape, in order of first appearance (optionally batched per shape).
        groups = {}
        for p in pieces:
            if p[5]:
                groups.setdefault((p[2], p[3]), []).append(p)
        batches = []
        for members in groups.values():
            if self.o["batch_tensors_with_same_shape"] and len(members) > 1:
                batches.append(members)
            else:
                batches.extend([m] for m in members)
        shapes = [(len(m), m[0][3], m[0][4]) for m in batches]
        if not self.o["warm_start"] or b not in self.q:
            qs = self.random_q(shapes)
        else:
            qs, at = [], 0
            for shape in shapes:
                qs.append(self.q[b][at:at + math.prod(shape)].view(shape))
                at += math.prod(shape)
        qs = [self.orthogonalize(q, self.o["orthogonalization_epsilon"]) for q in qs]
        mats = [[torch.stack([x[a:a + n].view(rows, cols) for a, n, rows, cols, _, _ in m]) for m in batches]
                for x in inputs]
        ps = [self.reduce_sum([self.store(mats[r][i] @ qs[i]) for r in range(self.world)]) for i in range(len(batches))]
        ps = [self.orthogonalize(p, self.o["orthogonalization_epsilon"]) for p in ps]
        qs = [self.store(self.reduce_sum([self.store(mats[r][i].transpose(1, 2) @ ps[i]) for r in range(self.world)])
                         / self.world) for i in range(len(batches))]
        for i, members in enumerate(batches):
            approx = self.store(ps[i] @ qs[i].transpose(1, 2))
            for k, (a, n, *_rest) in enumerate(members):
                outputs[a:a + n] = approx[k].reshape(-1)
        self.q[b] = torch.cat([q.reshape(-1) for q in qs])
        self.keep_error(b, inputs, outputs)
        return outputs

    def batched(self, b, inputs):
        total = inputs[0].numel()
        side = math.ceil(math.sqrt(total))
        rank = min(side, self.o["matrix_approximation_rank"])
        padded = [torch.cat([x, x.new_zeros(side * side - total)]) for x in inputs]
        padded = self.with_error(b, padded)
        if not self.o["warm_start"] or b not in self.q:
            q = self.random_q([(side, rank)])[0].unsqueeze(0)
        else:
            q = self.q[b].view(1, side, rank)
        q = self.orthogonalize(q, 0)
        mats = [x.view(1, side, side) for x in padded]
        p = self.orthogonalize(self.reduce_sum([self.store(m @ q) for m in mats]), 0)
        q = self.store(self.reduce_sum([self.store(m.transpose(1, 2) @ p) for m in mats]) / self.world)
        approx = self.store(p @ q.transpose(1, 2)).reshape(-1)
        self.q[b] = q.reshape(-1)
        self.keep_error(b, padded, approx)
        return approx[:total]

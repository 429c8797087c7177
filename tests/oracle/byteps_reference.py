"""BytePS's compressed push-pull, written from BytePS's own source
(github.com/bytedance/byteps, master) in numpy float32, independent of
commtune's code. It replays a commtune run from its gradient dumps: at every
step it takes each rank's local gradients and computes, with memories of its
own carried from step to step, what BytePS's MXNet trainer would hand the
optimizer; tests/oracle/test_byteps.py compares that with commtune's reduced
gradients bit for bit.

Each rule and where BytePS has it (paths under byteps/, lines at commit
f5df52fe2794d4e3d2931a9dcfa5ca56151062a1):

- mxnet/__init__.py:337 (DistributedTrainer._allreduce_grads): every
  gradient is multiplied by 1/workers before the push (commtune's gradients
  are already means over the local batch, so only the 1/workers part), and
  :340 push_pull sums (is_average=False).
- common/operations.cc:362 (InitTensor): a tensor under
  BYTEPS_MIN_COMPRESS_BYTES is not compressed; a larger one is cut into
  partitions of BYTEPS_PARTITION_BYTES, rounded up to pages
  (common/global.cc:142), each with a compressor of its own.
- common/compressor/compressor_registry.cc:44: a worker's chain is
  momentum(error feedback(compressor)); a server's has no momentum.
- compressor/impl/nesterov_momentum.cc:41,47: m = g + mu m; g = g + mu m
  (common/cpu_reducer.cc:269: dst = dst + alpha * src, float alpha).
- compressor/impl/vanilla_error_feedback.cc:62: g = g + (lr_prev / lr) e,
  :50 lr_prev = lr at the start; compressor/error_feedback.cc: c = C(g),
  e = g - D(c).
- compressor/impl/onebit.cc:54: bit = x < 0; :49 scale = (sum of |x| in a
  double, element by element) / n, or 1 unscaled; decodes to +-scale.
- compressor/impl/topk.cc:64: the k largest |x|; :99 decoding zeroes, then
  assigns; :128 the error is zero where kept.
- compressor/impl/randomk.cc:57 + compressor/utils.h:83,92: state {seed,
  seed}, index = next() % n, k draws with replacement; randomk.cc:88
  decoding assigns.
- k (topk.cc:34, randomk.cc the same): factor < 1 gives unsigned(factor *
  size / 4) in float, size the partition's bytes padded by common.h:281
  Align to 128; else the factor itself.
- server/server.cc:313 the first push decoded is copied (COPY_FIRST), :341
  the others decoded and added (SUM_RECV: dst = dst + src); :98 when all
  are in, the sum is compressed with the server's compressor (ALL_RECV),
  which workers pull and decode.
- mxnet/compression.py:91,97 (NagAdapter): after the pull, for a tensor
  with fewer *elements* than BYTEPS_MIN_COMPRESS_BYTES: m = (m + g) mu;
  g = g + m.

Where BytePS leaves the order open, this fixes it as commtune does: the
server adds the pushes in rank order (BytePS: arrival order); topk's ties at
the k-th magnitude go to the lower index (BytePS: its heap's order).
"""
import numpy as np

F32 = np.float32
MASK = (1 << 64) - 1


class XorShift128Plus:
    def __init__(self, seed):
        self.a, self.b = seed, seed

    def next(self):
        t, s = self.a, self.b
        self.a = s
        t = (t ^ (t << 23)) & MASK
        t ^= t >> 17
        t ^= s ^ (s >> 26)
        self.b = t
        return (t + s) & MASK


def resolve_k(factor, n):
    if F32(factor) >= 1:  # BytePS reads the factor as a float
        return int(F32(factor))
    size = 4 * n
    aligned = size + (128 - size % 128) % 128
    return max(1, int(F32(factor) * F32(aligned) / F32(4)))


class Compressor:
    """One partition's compressor: compress(x) -> payload, decode(payload) -> dense float32."""

    def __init__(self, kind, n, options):
        self.kind, self.n = kind, n
        self.k = resolve_k(options["byteps_compressor_k"], n)
        self.scaled = options["byteps_compressor_onebit_scaling"]
        self.rng = XorShift128Plus(options["byteps_seed"]) if kind == "randomk" else None

    def compress(self, x):
        if self.kind == "onebit":
            scale = F32(np.cumsum(np.abs(x).astype(np.float64))[-1] / len(x)) if self.scaled else F32(1)
            return (x < 0, scale)
        if self.kind == "topk":
            order = np.argsort(-np.abs(x), kind="stable")[: self.k]
            return (order, x[order].copy())
        indices = np.array([self.rng.next() % self.n for _ in range(self.k)], dtype=np.int64)
        return (indices, x[indices].copy())

    def decode(self, payload):
        if self.kind == "onebit":
            negative, scale = payload
            return np.where(negative, -scale, scale).astype(F32)
        indices, values = payload
        out = np.zeros(self.n, dtype=F32)
        out[indices] = values
        return out


class Worker:
    """A worker's chain for one partition: momentum(error feedback(compressor))."""

    def __init__(self, kind, n, options, server=False):
        self.compressor = Compressor(kind, n, options)
        self.momentum = None if server or options["byteps_momentum_type"] != "nesterov" else np.zeros(n, F32)
        self.mu = F32(options["byteps_momentum_mu"])
        self.error = np.zeros(n, F32) if options["byteps_ef_type"] == "vanilla" else None
        self.previous_lr = None

    def compress(self, g, lr):
        g = g.copy()
        if self.momentum is not None:
            self.momentum = g + self.mu * self.momentum
            g = g + self.mu * self.momentum
        if self.error is not None:
            ratio = F32((self.previous_lr if self.previous_lr is not None else lr) / lr)
            self.previous_lr = lr
            g = g + ratio * self.error
        payload = self.compressor.compress(g)
        if self.error is not None:
            self.error = g - self.compressor.decode(payload)
        return payload


class BytePS:
    """Every rank's worker memories and the server's, by (parameter, partition)."""

    def __init__(self, options, world):
        self.options, self.world = options, world
        self.kind = options["byteps_compressor_type"]
        page = 4096
        self.partition = (options["byteps_partition_bytes"] + page - 1) // page * page // 4
        self.workers, self.servers, self.nag = {}, {}, {}

    def push_pull(self, name, local, lr):
        """local: every rank's flat float32 gradient of one parameter; returns the pulled gradient."""
        o, world = self.options, self.world
        scaled = [g.astype(F32) * F32(1.0 / world) for g in local]
        n = len(scaled[0])
        if 4 * n < o["byteps_min_compress_bytes"]:
            out = scaled[0].copy()
            for g in scaled[1:]:
                out = out + g
        else:
            out = np.empty(n, F32)
            for p, first in enumerate(range(0, n, self.partition)):
                last = min(n, first + self.partition)
                key = (name, p)
                if key not in self.servers:
                    self.workers[key] = [Worker(self.kind, last - first, o) for _ in range(world)]
                    self.servers[key] = Worker(self.kind, last - first, o, server=True)
                pushes = [w.compress(g[first:last], lr) for w, g in zip(self.workers[key], scaled)]
                server = self.servers[key]
                total = server.compressor.decode(pushes[0])
                for push in pushes[1:]:
                    total = total + server.compressor.decode(push)
                out[first:last] = server.compressor.decode(server.compress(total, lr))
        if o["byteps_momentum_type"] == "nesterov" and n < o["byteps_min_compress_bytes"]:
            m = self.nag.get(name, np.zeros(n, F32))
            m = (m + out) * F32(o["byteps_momentum_mu"])
            self.nag[name] = m
            out = out + m
        return out

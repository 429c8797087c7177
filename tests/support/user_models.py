"""Models and data as a PyTorch 2.11 user brings them: modules saved with
torch.jit.script(...).save(path), and tensors written in one line of PyTorch
or NumPy. Imported by tests that run under the reference interpreter."""
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A pre-norm transformer block: causal scaled_dot_product_attention, a tanh-GELU MLP."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        batch, time, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(batch, time, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, time, d)
        x = x + self.proj(y)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class DecoderOnly(nn.Module):
    """A GPT-style language model whose output layer shares the token embedding (tied weights)."""

    def __init__(self, vocab: int = 64, seq_len: int = 32, d: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq_len, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids):
        x = self.tok(ids) + self.pos[: ids.size(1)]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    """A LLaMA-style block as written by hand: RMSNorm, rotary position embeddings on queries and
    keys, causal attention, a SwiGLU MLP."""

    def __init__(self, d: int, heads: int, seq_len: int):
        super().__init__()
        self.heads = heads
        self.norm1 = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.norm2 = RMSNorm(d)
        self.w1 = nn.Linear(d, 2 * d, bias=False)
        self.w3 = nn.Linear(d, 2 * d, bias=False)
        self.w2 = nn.Linear(2 * d, d, bias=False)
        half = d // heads // 2
        angles = torch.outer(torch.arange(seq_len, dtype=torch.float32),
                             1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / half)))
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rotate(self, t):
        time = t.size(2)
        a, b = t[..., 0::2], t[..., 1::2]
        cos, sin = self.cos[:time], self.sin[:time]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)

    def forward(self, x):
        batch, time, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, time, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(self.rotate(q), self.rotate(k), v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, time, d))
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    """A small LLaMA-style language model."""

    def __init__(self, vocab: int = 64, seq_len: int = 32, d: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([LlamaBlock(d, heads, seq_len) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class Residual(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class ResNet(nn.Module):
    """A small ResNet: a BatchNorm stem, two residual blocks, global pooling."""

    def __init__(self, classes: int = 10, channels: int = 16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels),
                                  nn.ReLU())
        self.blocks = nn.Sequential(Residual(channels), Residual(channels))
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


class Mlp(nn.Module):
    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


class DropoutMlp(nn.Module):
    """An MLP with dropout: its masks come from the global generator, step by step."""

    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Dropout(0.3), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


class BufferZoo(nn.Module):
    """An MLP that reads and updates a buffer of every dtype models keep: a complex64 rotary table
    (as Meta's LLaMA keeps freqs_cis), a float64 running mean near 1 + 1e-9, an int64 counter past
    2^24, an int32 tally past 2^24, a bool flag, float16, bfloat16 and uint8 buffers. Each rank
    updates them from its own batch, so the loss depends on whether every rank takes rank 0's
    buffers bit for bit before each forward (DDP's broadcast_buffers)."""

    def __init__(self, features: int = 32, classes: int = 5):
        super().__init__()
        self.fc1 = nn.Linear(features, 64)
        self.fc2 = nn.Linear(64, classes)
        angles = torch.arange(features // 2, dtype=torch.float32) * 0.37
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))
        self.register_buffer("mean64", torch.full((features,), 1 + 1e-9, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(2 ** 24, dtype=torch.int64))
        self.register_buffer("tally", torch.full((features,), 2 ** 24 - 7, dtype=torch.int32))
        self.register_buffer("flag", torch.tensor(False))
        self.register_buffer("half_scale", torch.ones(features, dtype=torch.float16))
        self.register_buffer("bf16_scale", torch.ones(features, dtype=torch.bfloat16))
        self.register_buffer("marks", torch.zeros(features, dtype=torch.uint8))

    def forward(self, x):
        if self.training:
            self.count.add_(1)
            self.mean64.mul_(0.999).add_(x.double().mean(0) * 1e-7 + 1e-3)
            self.tally.add_((x > 0).sum(0).to(torch.int32))
            self.flag.copy_(x.sum() > 0)
            self.half_scale.mul_(1 + x.mean(0).to(torch.float16) * 0.01)
            self.bf16_scale.mul_(1 + x.mean(0).to(torch.bfloat16) * 0.01)
            self.marks.add_((x[0] > 0).to(torch.uint8))
            turn = x.mean() * 0.5
            self.freqs_cis.mul_(torch.polar(torch.ones(1, device=x.device), turn.reshape(1)))
        batch = x.size(0)
        rotated = torch.view_as_real(torch.view_as_complex(x.reshape(batch, -1, 2)) * self.freqs_cis).flatten(1)
        shift = ((self.mean64 - 1.0) * 1e6).float() + (self.count - 2 ** 24).float() * 0.01
        shift = shift + (self.tally % 1000).float() * 1e-3 + self.marks.float() * 1e-2
        scale = self.half_scale.float() * self.bf16_scale.float() * (1.0 + self.flag.float() * 0.1)
        return self.fc2(torch.tanh(self.fc1(rotated * scale + shift)))


class Dtyped(nn.Module):
    """An MLP whose first layer is of `dtype`: a parameter commtune does not train."""

    def __init__(self, dtype: torch.dtype, features: int = 32, classes: int = 5):
        super().__init__()
        self.fc1 = nn.Linear(features, 64).to(dtype)
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x.to(self.fc1.weight.dtype)).real.float()))


def save_scripted(module, path):
    """The module as a TorchScript file, as a user saves it."""
    torch.manual_seed(0)
    torch.jit.script(module).save(path)
    return path


def token_sequences(samples=256, seq_len=32, vocab=64, seed=0):
    """Next-token prediction from a random Markov chain: inputs [N, T] and targets [N, T], int64."""
    g = torch.Generator().manual_seed(seed)
    transition = torch.softmax(torch.randn(vocab, vocab, generator=g) * 3, 1)
    tokens = torch.empty(samples, seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(vocab, (samples,), generator=g)
    for t in range(1, seq_len + 1):
        tokens[:, t] = torch.multinomial(transition[tokens[:, t - 1]], 1, generator=g).squeeze(1)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def labelled(shape, classes, seed=0):
    """Float inputs of `shape` ([N, ...]) and int64 labels from a random linear teacher."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    teacher = torch.randn(x[0].numel(), classes, generator=g)
    return x, x.flatten(1).matmul(teacher).argmax(1)


def write_tensors(kind, path, x, y):
    """x and y in one of the three forms the "tensors" dataset reads, written as a user would:
    "npy" (a folder of x.npy and y.npy), "safetensors", or "torch" (torch.save of a dict)."""
    if kind == "npy":
        os.makedirs(path, exist_ok=True)
        np.save(os.path.join(path, "x.npy"), x.numpy())
        np.save(os.path.join(path, "y.npy"), y.numpy())
    elif kind == "safetensors":
        from safetensors.torch import save_file
        save_file({"x": x.contiguous(), "y": y.contiguous()}, path)
    elif kind == "torch":
        torch.save({"x": x, "y": y}, path)
    else:
        raise ValueError(kind)
    return path

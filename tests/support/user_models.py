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

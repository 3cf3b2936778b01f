"""Model factories for the `kernelloop e2e` CLI tests (file.py:factory), sized to the integrate package (64
features, gemm_nt N=32 K=64, fp16 entries, 1..16 tokens)."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(64)
        self.proj = nn.Linear(64, 32, bias=False)

    def forward(self, x):
        return self.proj(self.ln(x))


class Uncovered(nn.Module):
    """No module the package has an entry for (Linear 64 -> 48), no softmax: nothing reaches the package."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 48, bias=False)

    def forward(self, x):
        return self.proj(x)


class Raises(Net):
    def forward(self, x):
        raise ValueError("boom in forward")


def _x(dtype):
    return torch.randn(2, 6, 64, generator=torch.Generator().manual_seed(0)).to(dtype)


def fp16_by_default(dtype=torch.float16, seed=0):
    """A factory whose own default dtype is fp16 (the package's)."""
    torch.manual_seed(seed)
    return Net().to(dtype), (_x(dtype),)


def as_list(dtype=torch.float16):
    torch.manual_seed(0)
    return Net().to(dtype), [_x(dtype)]


def as_dict(dtype=torch.float16):
    torch.manual_seed(0)
    return Net().to(dtype), {"x": _x(dtype)}


def uncovered(dtype=torch.float16):
    torch.manual_seed(0)
    return Uncovered().to(dtype), (_x(dtype),)


def raises(dtype=torch.float16):
    return Raises().to(dtype), (_x(dtype),)

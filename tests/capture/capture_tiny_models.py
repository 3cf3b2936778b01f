"""Tiny custom models for the capture tests (no transformers): each exercises one mapping rule or failure."""

import torch
import torch.nn.functional as F
from torch import nn


class MyRMSNorm(nn.Module):
    """Name ends in RMSNorm, has weight and variance_epsilon, computes the rmsnorm formula: maps by name."""

    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(n) + 0.5)
        self.variance_epsilon = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)).to(x.dtype) * self.weight


class OffsetRMSNorm(MyRMSNorm):
    """Gemma-style (OFFSET + weight): the name matches; offset 1 is rmsnorm_offset's formula, another is not."""

    OFFSET = 1.0

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)).to(x.dtype) * \
            (self.OFFSET + self.weight)


class TwoOffsetRMSNorm(OffsetRMSNorm):
    OFFSET = 2.0


class Block(nn.Module):
    """norm -> linear (no bias) -> softmax over the last dim (an ATen call in an unrecognised module)."""

    def __init__(self, n=64, hidden=128, norm=MyRMSNorm):
        super().__init__()
        self.norm = norm(n)
        self.proj = nn.Linear(n, hidden, bias=False)

    def forward(self, x):
        return torch.softmax(self.proj(self.norm(x)), dim=-1)


class Tiny(nn.Module):
    def __init__(self, norm=MyRMSNorm):
        super().__init__()
        self.blocks = nn.ModuleList([Block(norm=norm), Block(norm=norm)])
        self.head = nn.Linear(128, 64, bias=False)

    def forward(self, x):
        for b in self.blocks:
            x = self.head(b(x))
        return x


def build(device="cpu", dtype=torch.bfloat16, seed=0, batch=2, seq=8):
    """The factory `kernelloop capture` calls: (model, example_inputs)."""
    torch.manual_seed(seed)
    model = Tiny().to(device=device, dtype=dtype).eval()
    return model, (torch.randn(batch, seq, 64, device=device, dtype=dtype),)


def build_no_params():
    """A factory taking no arguments (kernelloop capture passes none)."""
    return build()


def not_a_pair():
    return nn.Linear(4, 4)


def several_examples():
    """A list of examples (as `kernelloop.deliver.fuse` takes) where one call's arguments belong."""
    return nn.Linear(4, 4), [(torch.randn(2, 4),), (torch.randn(3, 4),)]


def no_tensor():
    return nn.Linear(4, 4), "x"


class Boom(nn.Module):
    def forward(self, x):
        raise RuntimeError("boom inside")


class Raises(nn.Module):
    """Fails two levels down, in `inner.bad`."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(8, 8, bias=False))
        self.inner.add_module("bad", Boom())

    def forward(self, x):
        return self.inner(x)


def build_raises():
    return Raises().eval(), (torch.randn(2, 8),)


class Attn(nn.Module):
    """Plain SDPA: kwargs pick causal, a mask, a head dim, kv length."""

    def __init__(self, *, causal=True, mask=False, d=64, s_kv=None, heads=4, kv_heads=4):
        super().__init__()
        self.causal, self.mask, self.d, self.s_kv, self.heads, self.kv_heads = causal, mask, d, s_kv, heads, kv_heads

    def forward(self, x):
        b, s, _ = x.shape
        q = x.new_ones(b, self.heads, s, self.d)
        kv_len = self.s_kv or s
        k = x.new_ones(b, self.kv_heads, kv_len, self.d)
        mask = torch.ones(s, kv_len, dtype=torch.bool) if self.mask else None
        gqa = self.kv_heads != self.heads
        return F.scaled_dot_product_attention(q, k, k, attn_mask=mask, is_causal=self.causal and not self.mask,
                                              enable_gqa=gqa)

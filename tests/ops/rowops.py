"""Helpers shared by the tests of the row-op templates (layernorm, rmsnorm, softmax): import a template file as a
module, the fp64 truth, and a strided input with a NaN-poisoned output that has one row past its end."""

import importlib.util
from pathlib import Path

import torch
from kernelloop.base.builtin import ops_dir

OPS = ops_dir()
DT = {"fp16": torch.float16, "fp32": torch.float32}


def template_module(op: str, file: str):
    spec = importlib.util.spec_from_file_location(f"_{Path(file).stem}_{op}", OPS / op / file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def truth(op: str, x: torch.Tensor, w: torch.Tensor | None, eps: float, b: torch.Tensor | None = None) -> torch.Tensor:
    xd = x.double()
    if op == "softmax":
        return torch.softmax(xd, dim=-1)
    if op == "layernorm":
        return torch.nn.functional.layer_norm(xd, (x.shape[-1],), w.double(), b.double(), eps)
    return xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + eps) * w.double()


def strided_case(M: int, N: int, dtype: str):
    """(generator, x: every other row of a wider buffer, buf: NaN-filled (M + 1) x N, y: its first M rows)."""
    gen = torch.Generator().manual_seed(M * 100003 + N)
    base = (torch.randn(2 * M, N + 8, generator=gen) * 2 + 0.5).to(DT[dtype])
    buf = torch.full((M + 1, N), float("nan"), dtype=DT[dtype])
    return gen, base[::2, :N], buf, buf[:M]

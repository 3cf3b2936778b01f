"""Trusted reference: plain PyTorch. Called on upcast inputs for the truth, on op-dtype inputs as the eager baseline.
Gemma's RMSNorm: the weight is stored as a difference from 1 and scales by (offset + weight)."""

import torch


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float) -> torch.Tensor:
    xf, wf = x.float() if x.dtype != torch.float64 else x, weight.float() if weight.dtype != torch.float64 else weight
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * (offset + wf)
    return y.to(x.dtype)

"""Trusted reference: the inclusive prefix sum along the last axis, y[i, j] = sum_{k <= j} x[i, k]. Called on float64
x for the truth, on op-dtype inputs as the eager baseline (torch.cumsum)."""

import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=-1)

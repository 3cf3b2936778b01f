"""Trusted reference: plain PyTorch. Called on upcast inputs for the truth, on op-dtype inputs as the eager baseline."""

import torch


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b.T

"""Trusted reference: plain PyTorch. Called on upcast inputs for the truth (float64, compared with the fp32 output),
on op-dtype inputs as the eager baseline (there it returns the inputs' dtype: a cuBLAS GEMM, not an fp32-output one;
the `cublas` baseline in baselines.py is the fp32-output GEMM)."""

import torch


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b

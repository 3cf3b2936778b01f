"""The torch dtypes of the records' DType, both ways (the package runtime and its torch ops convert with them)."""

from __future__ import annotations

import torch

from ...base.records import DType

TORCH_DTYPES = {DType.fp16: torch.float16, DType.bf16: torch.bfloat16, DType.fp32: torch.float32}
FROM_TORCH = {v: k for k, v in TORCH_DTYPES.items()}

__all__ = ["FROM_TORCH", "TORCH_DTYPES"]

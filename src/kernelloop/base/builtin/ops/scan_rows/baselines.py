"""Vendor baseline for scan_rows: torch.cumsum accumulating in float32 (the kernels' own accumulation), cast back to
the input dtype. The built-in `eager` baseline is torch.cumsum in the input dtype (the reference on op-dtype inputs).

BASELINES maps a name to a zero-argument factory. A factory imports lazily and returns `fn(x) -> y`: the baseline
allocates and returns its own output, as it would in real use.
"""

from __future__ import annotations

from typing import Callable


def _torch_cumsum_fp32() -> Callable:
    import torch

    def fn(x):
        return torch.cumsum(x, dim=-1, dtype=torch.float32).to(x.dtype)

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "torch_cumsum_fp32": _torch_cumsum_fp32,
}

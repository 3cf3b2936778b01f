"""Vendor baseline for histogram: torch.bincount straight on the int32 values, its own int64 output, no cast.

BASELINES maps a name to a zero-argument factory. A factory imports lazily and returns `fn(x, bins) -> counts`: the
baseline allocates and returns its own output, as it would in real use (`bins` only carries B, its length).
The built-in `eager` baseline (the reference: bincount on int64 values, cast to int32) and `torch.compile` come on
top.
"""

from __future__ import annotations

from typing import Callable


def _torch_bincount() -> Callable:
    import torch

    def fn(x, bins):
        return torch.bincount(x, minlength=bins.numel())

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "torch_bincount": _torch_bincount,
}

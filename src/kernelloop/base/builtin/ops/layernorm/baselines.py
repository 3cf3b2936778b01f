"""Third-party baselines for layernorm.

BASELINES maps a name to a zero-argument factory. A factory imports lazily (raising ImportError
when the library is missing) and returns `fn(x, weight, bias, *, eps) -> y`: the baseline
allocates and returns its own output, as it would in real use, so no extra copy is timed.
"""

from __future__ import annotations

from typing import Callable


def _liger() -> Callable:
    # Liger-Kernel 0.8.5: liger_kernel/ops/layer_norm.py
    #   LigerLayerNormFunction.forward(ctx, X, W, B, eps)  -> Y
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction

    def fn(x, weight, bias, *, eps):
        return LigerLayerNormFunction.apply(x, weight, bias, eps)

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "liger": _liger,
}

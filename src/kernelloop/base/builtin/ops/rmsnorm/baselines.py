"""Third-party baselines for rmsnorm.

BASELINES maps a name to a zero-argument factory. A factory imports lazily (raising ImportError
when the library is missing) and returns `fn(x, weight, *, eps) -> y`: the baseline allocates
and returns its own output, as it would in real use, so no extra copy is timed.
"""

from __future__ import annotations

from typing import Callable


def _liger() -> Callable:
    # Liger-Kernel 0.8.5: liger_kernel/ops/rms_norm.py
    #   LigerRMSNormFunction.forward(ctx, X, W, eps, offset=0.0, casting_mode="llama",
    #                                in_place=True, row_mode=None)  -> Y
    # casting_mode "gemma": x and w upcast to fp32, y = x * rstd * (offset + w) in fp32, one cast
    # back to the input dtype: the same math as our reference/kernel. ("llama" casts x * rstd back
    # to the input dtype *before* multiplying by w, i.e. two roundings, a different function.)
    # offset 0.0 so the weight is used as is. autograd.Function.apply takes positional args only.
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    def fn(x, weight, *, eps):
        return LigerRMSNormFunction.apply(x, weight, eps, 0.0, "gemma")

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "liger": _liger,
}

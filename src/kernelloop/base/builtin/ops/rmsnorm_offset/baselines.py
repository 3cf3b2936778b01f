"""Third-party baselines for rmsnorm_offset (see ../rmsnorm/baselines.py for the form of a factory)."""

from __future__ import annotations

from typing import Callable


def _liger() -> Callable:
    # Liger-Kernel 0.8.5: LigerRMSNormFunction.apply(X, W, eps, offset, casting_mode): casting_mode "gemma" is
    # x and w in fp32, y = x * rstd * (offset + w), one cast back -- the reference's math.
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    def fn(x, weight, *, eps, offset):
        return LigerRMSNormFunction.apply(x, weight, eps, offset, "gemma")

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "liger": _liger,
}

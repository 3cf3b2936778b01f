"""Third-party baselines for softmax.

BASELINES maps a name to a zero-argument factory. A factory imports lazily (raising ImportError
when the library is missing) and returns `fn(x) -> y`: the baseline allocates and returns its
own output, as it would in real use, so no extra copy is timed.
"""

from __future__ import annotations

from typing import Callable


def _liger() -> Callable:
    # Liger-Kernel 0.8.5: liger_kernel/ops/softmax.py
    #   LigerSoftmaxFunction.forward(ctx, input_)  -> y   (softmax over the last dim)
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    def fn(x):
        return LigerSoftmaxFunction.apply(x)

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "liger": _liger,
}

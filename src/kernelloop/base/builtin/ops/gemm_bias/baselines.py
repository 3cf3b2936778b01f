"""cuBLAS baselines for gemm_bias, measured in the same run as the candidates.

BASELINES maps a name to a zero-argument factory. A factory imports lazily and returns `fn(a, b, bias) -> c`: the
baseline allocates and returns its own output, as it would in real use, so no extra copy is timed. "cublas" is
the call a PyTorch user would write for this op: torch.addmm, cuBLASLt's bias epilogue.
On a GPU torch dispatches it to cuBLAS / cuBLASLt.
"""

from __future__ import annotations

from typing import Callable


def _cublas() -> Callable:
    import torch

    def fn(a, b, bias):
        return torch.addmm(bias, a, b)

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "cublas": _cublas,
}

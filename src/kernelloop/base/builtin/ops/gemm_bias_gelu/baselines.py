"""cuBLAS baselines for gemm_bias_gelu, measured in the same run as the candidates.

BASELINES maps a name to a zero-argument factory. A factory imports lazily and returns `fn(a, b, bias) -> c`: the
baseline allocates and returns its own output, as it would in real use, so no extra copy is timed. "cublas" is
the call a PyTorch user would write for this op: torch.addmm then F.gelu, two kernels.
On a GPU torch dispatches it to cuBLAS / cuBLASLt.
"""

from __future__ import annotations

from typing import Callable


def _cublas() -> Callable:
    import torch
    import torch.nn.functional as F

    def fn(a, b, bias):
        return F.gelu(torch.addmm(bias, a, b))

    return fn


def _cublaslt_gelu_tanh() -> Callable:
    # cuBLASLt's fused GELU epilogue (one kernel). It computes the tanh approximation of GELU, not the exact erf
    # GELU of this op (they differ by up to ~5e-4 absolute): a timing reference only, never verified against ours.
    import torch

    def fn(a, b, bias):
        return torch._addmm_activation(bias, a, b, use_gelu=True)

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "cublas": _cublas,
    "cublaslt-gelu-tanh": _cublaslt_gelu_tanh,
}

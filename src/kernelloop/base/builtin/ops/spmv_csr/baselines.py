"""Vendor baseline for spmv_csr: torch.sparse's CSR matrix-vector product (cuSPARSE on a GPU).

BASELINES maps a name to a zero-argument factory. A factory imports lazily and returns `fn(row_ptr, col_idx, values,
x) -> y`: the baseline allocates and returns its own output, as it would in real use. The CSR tensor is built inside
the timed call (torch.sparse_csr_tensor wraps the given buffers without copying them).
"""

from __future__ import annotations

from typing import Callable


def _torch_sparse() -> Callable:
    import torch

    def fn(row_ptr, col_idx, values, x):
        a = torch.sparse_csr_tensor(row_ptr, col_idx, values, size=(row_ptr.numel() - 1, x.numel()))
        return torch.mv(a, x)

    return fn


BASELINES: dict[str, Callable[[], Callable]] = {
    "torch_sparse": _torch_sparse,
}

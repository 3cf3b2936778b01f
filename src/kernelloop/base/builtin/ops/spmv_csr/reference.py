"""Trusted reference: y = A @ x for A in CSR (row pointers, column indices, values). Called on float64 values and x
(the indices as they are) for the truth, on op-dtype inputs as the eager baseline."""

import torch


def reference(row_ptr: torch.Tensor, col_idx: torch.Tensor, values: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    rows = row_ptr.numel() - 1
    row_of = torch.repeat_interleave(torch.arange(rows, device=values.device), (row_ptr[1:] - row_ptr[:-1]).long())
    y = torch.zeros(rows, dtype=values.dtype, device=values.device)
    return y.index_add_(0, row_of, values * x[col_idx.long()])

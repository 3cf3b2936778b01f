"""CSR sparse matrix times dense vector, y = A @ x, with the products accumulated in float32.

Two ways of mapping rows to lanes (VARIANT):
- "vector" (vector per row): each program takes ROWS rows one after another; a row's entries are read BLOCK at a
  time (column indices, values, and the gathered x), multiplied and summed across the block. Rows of any length,
  power-law rows included, cost about their own length; a short row leaves most of the block idle.
- "scalar" (scalar per row): each program takes ROWS consecutive rows, one lane each, and steps through their j-th
  entries together until its longest row is done. Short, even rows fill every lane; one long row holds its whole
  program back.

An empty row (start == end) runs no iteration and stores 0. Rows past M are masked off (start = end = 0).
"""

import triton
import triton.language as tl


@triton.jit
def _spmv_vector(RP, CI, V, X, Y, M, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    for r in tl.static_range(ROWS):
        row = pid * ROWS + r
        live = row < M
        start = tl.load(RP + row, mask=live, other=0)
        end = tl.load(RP + row + 1, mask=live, other=0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for k in range(start, end, BLOCK):
            idx = k + offs
            m = idx < end
            c = tl.load(CI + idx, mask=m, other=0)
            v = tl.load(V + idx, mask=m, other=0.0).to(tl.float32)
            xv = tl.load(X + c, mask=m, other=0.0).to(tl.float32)
            acc += v * xv
        tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty), mask=live)


@triton.jit
def _spmv_scalar(RP, CI, V, X, Y, M, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    live = rows < M
    start = tl.load(RP + rows, mask=live, other=0)
    end = tl.load(RP + rows + 1, mask=live, other=0)
    longest = tl.max(end - start, axis=0)
    acc = tl.zeros([ROWS], dtype=tl.float32)
    for j in range(0, longest):
        idx = start + j
        m = idx < end
        c = tl.load(CI + idx, mask=m, other=0)
        v = tl.load(V + idx, mask=m, other=0.0).to(tl.float32)
        xv = tl.load(X + c, mask=m, other=0.0).to(tl.float32)
        acc += v * xv
    tl.store(Y + rows, acc.to(Y.dtype.element_ty), mask=live)


def launch(row_ptr, col_idx, values, x, y, *, VARIANT, ROWS, BLOCK, num_warps):
    M = y.numel()
    grid = (triton.cdiv(M, ROWS),)
    if VARIANT == "vector":
        _spmv_vector[grid](row_ptr, col_idx, values, x, y, M, BLOCK=BLOCK, ROWS=ROWS, num_warps=num_warps)
    else:
        _spmv_scalar[grid](row_ptr, col_idx, values, x, y, M, ROWS=ROWS, num_warps=num_warps)

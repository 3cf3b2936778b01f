"""Inclusive prefix sum along the last axis of an M x N tensor, y[i, j] = sum_{k <= j} x[i, k], accumulated in
float32 and stored in the output's dtype (the input's).

Two algorithms (ALGO):
- "chunked": each program takes ROWS rows and walks them BLOCK columns at a time: tl.cumsum scans the chunk and the
  row's running total (the carry) is added to it, then the chunk's sum is added to the carry. One read and one write
  of x; a row's chunks run one after another, so few long rows leave the GPU mostly idle.
- "reduce_then_scan": a row is split into cdiv(N, BLOCK) tiles handled by separate programs. Pass 1 writes each
  tile's sum into the workspace (`scratch`, [M, cdiv(N, BLOCK)] fp32); pass 2 turns each row's tile sums into their
  inclusive prefix sums in place (one program per row, chunked like above); pass 3 scans every tile locally and adds
  the prefix of the tiles before it. x is read twice; every tile of every row runs in parallel, so a handful of very long rows still
  fills the GPU. ROWS is unused (the space keeps it at 1).

Rows past M and columns past N are masked off; masked lanes load 0, which leaves the sums unchanged. NaN and Inf
propagate as in IEEE float32 addition: a NaN at x[i, k] makes y[i, j] NaN for every j >= k.
"""

import triton
import triton.language as tl


@triton.jit
def _scan_chunked(X, Y, M, N, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    live = rows < M
    base = rows.to(tl.int64) * N
    carry = tl.zeros([ROWS], dtype=tl.float32)
    for k in range(0, N, BLOCK):
        idx = k + cols
        m = live[:, None] & (idx < N)[None, :]
        offs = base[:, None] + idx[None, :]
        v = tl.load(X + offs, mask=m, other=0.0).to(tl.float32)
        s = tl.cumsum(v, axis=1) + carry[:, None]
        tl.store(Y + offs, s.to(Y.dtype.element_ty), mask=m)
        carry += tl.sum(v, axis=1)


@triton.jit
def _tile_sums(X, S, N, T, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    t = tl.program_id(1)
    idx = t * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(X + row.to(tl.int64) * N + idx, mask=idx < N, other=0.0).to(tl.float32)
    tl.store(S + row * T + t, tl.sum(v, axis=0))


@triton.jit
def _scan_sums(S, T, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    carry = 0.0
    for k in range(0, T, BLOCK):
        idx = k + cols
        m = idx < T
        v = tl.load(S + row * T + idx, mask=m, other=0.0)
        tl.store(S + row * T + idx, tl.cumsum(v, axis=0) + carry, mask=m)
        carry += tl.sum(v, axis=0)


@triton.jit
def _scan_tiles(X, Y, S, N, T, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    t = tl.program_id(1)
    idx = t * BLOCK + tl.arange(0, BLOCK)
    m = idx < N
    offs = row.to(tl.int64) * N + idx
    v = tl.load(X + offs, mask=m, other=0.0).to(tl.float32)
    # the inclusive sum of the tiles before this one (none for the first: a subtraction would turn Inf into NaN)
    s = tl.cumsum(v, axis=0) + tl.load(S + row * T + t - 1, mask=t > 0, other=0.0)
    tl.store(Y + offs, s.to(Y.dtype.element_ty), mask=m)


def launch(x, y, *, ALGO, BLOCK, ROWS, num_warps, scratch=None):
    M, N = x.shape
    if ALGO == "chunked":
        _scan_chunked[(triton.cdiv(M, ROWS),)](x, y, M, N, BLOCK=BLOCK, ROWS=ROWS, num_warps=num_warps)
        return
    T = triton.cdiv(N, BLOCK)
    if scratch is None or scratch.numel() < M * T:
        raise ValueError(f"reduce_then_scan needs a scratch of at least M * cdiv(N, BLOCK) = {M * T} fp32 elements")
    _tile_sums[(M, T)](x, scratch, N, T, BLOCK=BLOCK, num_warps=num_warps)
    _scan_sums[(M,)](scratch, T, BLOCK=BLOCK, num_warps=num_warps)
    _scan_tiles[(M, T)](x, y, scratch, N, T, BLOCK=BLOCK, num_warps=num_warps)

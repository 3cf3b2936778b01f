"""Histogram of int32 values into B bins, counts[b] = #{i : x[i] == b}, in int32 counters.

The launcher first zeroes the counts (a kernel of its own, launched before the histogram on the same stream: the
output buffer holds anything on entry), then runs one of two strategies (STRATEGY):
- "atomic" (global atomics): each program reads TILES tiles of BLOCK values and adds 1 to each value's counter with
  an atomic add. Any B; the cost grows with contention (all values equal: every add hits one counter).
- "private" (privatised): each program counts its TILES x BLOCK values into a private histogram of BINS =
  next_pow2(B) counters held in registers (a BLOCK x BINS comparison summed over the block), then merges it into the
  counts with one atomic add per non-zero bin. Contention costs nothing; only for small B.

Lanes past N are masked off (the private histogram loads them as -1, which matches no bin).
"""

import triton
import triton.language as tl

ZERO_BLOCK = 1024


@triton.jit
def _zero(C, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(C + offs, tl.zeros([BLOCK], dtype=C.dtype.element_ty), mask=offs < B)


@triton.jit
def _hist_atomic(X, C, N, BLOCK: tl.constexpr, TILES: tl.constexpr):
    pid = tl.program_id(0)
    ones = tl.full([BLOCK], 1, C.dtype.element_ty)
    for t in range(TILES):
        offs = (pid * TILES + t) * BLOCK + tl.arange(0, BLOCK)
        m = offs < N
        x = tl.load(X + offs, mask=m, other=0)
        tl.atomic_add(C + x, ones, mask=m)


@triton.jit
def _hist_private(X, C, N, B, BLOCK: tl.constexpr, TILES: tl.constexpr, BINS: tl.constexpr):
    pid = tl.program_id(0)
    b = tl.arange(0, BINS)
    h = tl.zeros([BINS], dtype=tl.int32)
    for t in range(TILES):
        offs = (pid * TILES + t) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + offs, mask=offs < N, other=-1)
        h += tl.sum((x[:, None] == b[None, :]).to(tl.int32), axis=0)
    tl.atomic_add(C + b, h.to(C.dtype.element_ty), mask=(b < B) & (h > 0))


def launch(x, bins, counts, *, STRATEGY, BLOCK, TILES, num_warps):
    N, B = x.numel(), counts.numel()
    _zero[(triton.cdiv(B, ZERO_BLOCK),)](counts, B, BLOCK=ZERO_BLOCK)
    grid = (triton.cdiv(N, BLOCK * TILES),)
    if STRATEGY == "atomic":
        _hist_atomic[grid](x, counts, N, BLOCK=BLOCK, TILES=TILES, num_warps=num_warps)
    else:
        _hist_private[grid](x, counts, N, B, BLOCK=BLOCK, TILES=TILES, BINS=triton.next_power_of_2(B),
                            num_warps=num_warps)

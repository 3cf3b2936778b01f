"""RMSNorm forward, chunk-resident: y = x / sqrt(mean(x^2) + eps) * (offset + weight) (offset 0 for rmsnorm, 1 for
rmsnorm_offset, added to the weight in fp32).

The row is cut into NCHUNK = cdiv(N, CHUNK) power-of-two chunks, unrolled at compile time and held in registers
(a tuple), so N = 5000 is 5 x 1024 lanes (2.3 % masked) instead of one 8192-lane block, and only the last chunk
carries a mask. One DRAM read of the row, one write. VEC (the largest power of two <= 16 dividing both row
strides and N) is asserted with tl.multiple_of so rows that Triton cannot prove 16-byte aligned (N = 5000) still
move as 16-byte vectors. ROWS rows per program; the last program's extra rows recompute row M-1 (identical
values written twice) instead of masking rows. Any N is correct: when a row would need more than MAX_CHUNKS
chunks the launcher widens the chunk.
"""

import triton
import triton.language as tl

MAX_CHUNKS = 32


@triton.jit
def _ld(ptrs, mask, MASKED: tl.constexpr):
    if MASKED:
        v = tl.load(ptrs, mask=mask, other=0.0)
    else:
        v = tl.load(ptrs)
    return v


@triton.jit
def _st(ptrs, v, mask, MASKED: tl.constexpr):
    if MASKED:
        tl.store(ptrs, v, mask=mask)
    else:
        tl.store(ptrs, v)


@triton.jit
def _rmsnorm_chunked(X, W, Y, M, N, stride_x, stride_y, eps, offset, CHUNK: tl.constexpr, NCHUNK: tl.constexpr,
                     TAIL: tl.constexpr, ROWS: tl.constexpr, VEC: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, CHUNK)
    rem = N - (NCHUNK - 1) * CHUNK
    if VEC > 1:  # (N == 1 reaches the kernel as a constant, which takes no hint; VEC is 1 then)
        rem = tl.multiple_of(rem, VEC)
    tmask = cols < rem
    for r in tl.static_range(ROWS):
        row = tl.minimum(pid * ROWS + r, M - 1).to(tl.int64)
        xrow = X + tl.multiple_of(row * stride_x, VEC)
        yrow = Y + tl.multiple_of(row * stride_y, VEC)
        xs = ()
        acc = tl.zeros([CHUNK], dtype=tl.float32)
        for c in tl.static_range(NCHUNK):
            x = _ld(xrow + c * CHUNK + cols, tmask, TAIL and c == NCHUNK - 1).to(tl.float32)
            acc += x * x
            xs = xs + (x,)
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for c in tl.static_range(NCHUNK):
            w = _ld(W + c * CHUNK + cols, tmask, TAIL and c == NCHUNK - 1).to(tl.float32) + offset
            _st(yrow + c * CHUNK + cols, (xs[c] * rstd * w).to(Y.dtype.element_ty), tmask, TAIL and c == NCHUNK - 1)


def _pow2_factor(v: int) -> int:
    return 16 if v == 0 else min(16, v & -v)


def launch(x, weight, y, *, eps, CHUNK=1024, ROWS=1, num_warps=4, offset=0.0):
    M, N = x.shape
    if M == 0 or N == 0:
        return
    chunk = max(min(CHUNK, triton.next_power_of_2(N)), triton.next_power_of_2(triton.cdiv(N, MAX_CHUNKS)))
    nchunk = triton.cdiv(N, chunk)
    vec = min(_pow2_factor(x.stride(0)), _pow2_factor(y.stride(0)), _pow2_factor(N))
    rows = max(1, min(ROWS, M))
    _rmsnorm_chunked[(triton.cdiv(M, rows),)](
        x, weight, y, M, N, x.stride(0), y.stride(0), eps, offset,
        CHUNK=chunk, NCHUNK=nchunk, TAIL=N % chunk != 0, ROWS=rows, VEC=vec, num_warps=num_warps)

"""RMSNorm forward, one program per ROWS rows: y = x / sqrt(mean(x^2) + eps) * (offset + weight).

`offset` is 0 for rmsnorm, 1 for rmsnorm_offset (Gemma's (1 + weight)); it is added to the weight in fp32.

When one block covers the row (SINGLE) the row stays in registers: one read, one write.
Otherwise the row is streamed in BLOCK_N pieces: a pass for the sum of squares, one to
normalise (two reads, the second usually hits L2; EVICT_FIRST applies to the last read).
"""

import triton
import triton.language as tl


@triton.jit
def _rmsnorm_fwd(X, W, Y, M, N, stride_x, stride_y, eps, offset,
                 BLOCK_N: tl.constexpr, ROWS: tl.constexpr, SINGLE: tl.constexpr,
                 EVICT_FIRST: tl.constexpr, STREAM_STORE: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    if SINGLE:
        cmask = cols < N
        w = tl.load(W + cols, mask=cmask, other=0.0).to(tl.float32) + offset
        for r in tl.static_range(ROWS):
            row = pid * ROWS + r
            mask = cmask & ((cols * 0 + row) < M)
            if EVICT_FIRST:
                x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            else:
                x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
            x = x.to(tl.float32)
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
            y = x * rstd * w
            if STREAM_STORE:  # streaming store (.cs): the output is not re-read, keep it out of L2
                tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask, cache_modifier=".cs")
            else:
                tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
    else:
        row = pid
        xrow = X + row * stride_x
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            x = tl.load(xrow + c, mask=c < N, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            m = c < N
            if EVICT_FIRST:
                x = tl.load(xrow + c, mask=m, other=0.0, eviction_policy="evict_first")
            else:
                x = tl.load(xrow + c, mask=m, other=0.0)
            x = x.to(tl.float32)
            w = tl.load(W + c, mask=m, other=0.0).to(tl.float32) + offset
            if STREAM_STORE:  # streaming store (.cs): the output is not re-read, keep it out of L2
                tl.store(Y + row * stride_y + c, (x * rstd * w).to(Y.dtype.element_ty), mask=m, cache_modifier=".cs")
            else:
                tl.store(Y + row * stride_y + c, (x * rstd * w).to(Y.dtype.element_ty), mask=m)


def launch(x, weight, y, *, eps, BLOCK_N, ROWS, num_warps, EVICT_FIRST=0, STREAM_STORE=0, offset=0.0):
    M, N = x.shape
    single = BLOCK_N >= N
    rows = ROWS if single else 1
    grid = (triton.cdiv(M, rows),)
    _rmsnorm_fwd[grid](x, weight, y, M, N, x.stride(0), y.stride(0), eps, offset,
                       BLOCK_N=BLOCK_N, ROWS=rows, SINGLE=single, EVICT_FIRST=EVICT_FIRST, STREAM_STORE=STREAM_STORE,
                       num_warps=num_warps)

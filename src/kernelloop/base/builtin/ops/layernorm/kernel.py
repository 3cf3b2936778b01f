"""LayerNorm forward, one program per ROWS rows.

When one block covers the row (SINGLE) the row stays in registers: one read, one write.
Otherwise the row is streamed in BLOCK_N pieces: a pass for the mean, one for the variance,
one to normalise (three reads, the later ones usually hit L2).
"""

import triton
import triton.language as tl


@triton.jit
def _layernorm_fwd(X, W, B, Y, M, N, stride_x, stride_y, eps,
                   BLOCK_N: tl.constexpr, ROWS: tl.constexpr, SINGLE: tl.constexpr,
                   EVICT_FIRST: tl.constexpr, STREAM_STORE: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    if SINGLE:
        cmask = cols < N
        w = tl.load(W + cols, mask=cmask, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=cmask, other=0.0).to(tl.float32)
        for r in tl.static_range(ROWS):
            row = pid * ROWS + r
            mask = cmask & ((cols * 0 + row) < M)
            if EVICT_FIRST:
                x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            else:
                x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
            x = x.to(tl.float32)
            mean = tl.sum(x, axis=0) / N
            xc = tl.where(cmask, x - mean, 0.0)
            var = tl.sum(xc * xc, axis=0) / N
            rstd = 1.0 / tl.sqrt(var + eps)
            y = xc * rstd * w + b
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
            acc += tl.load(xrow + c, mask=c < N, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / N
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            x = tl.load(xrow + c, mask=c < N, other=0.0).to(tl.float32)
            d = tl.where(c < N, x - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            m = c < N
            x = tl.load(xrow + c, mask=m, other=0.0).to(tl.float32)
            w = tl.load(W + c, mask=m, other=0.0).to(tl.float32)
            b = tl.load(B + c, mask=m, other=0.0).to(tl.float32)
            if STREAM_STORE:  # streaming store (.cs): the output is not re-read, keep it out of L2
                tl.store(Y + row * stride_y + c, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=m, cache_modifier=".cs")
            else:
                tl.store(Y + row * stride_y + c, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=m)


def launch(x, weight, bias, y, *, eps, BLOCK_N, ROWS, num_warps, EVICT_FIRST=0, STREAM_STORE=0):
    M, N = x.shape
    single = BLOCK_N >= N
    rows = ROWS if single else 1
    grid = (triton.cdiv(M, rows),)
    _layernorm_fwd[grid](x, weight, bias, y, M, N, x.stride(0), y.stride(0), eps,
                         BLOCK_N=BLOCK_N, ROWS=rows, SINGLE=single, EVICT_FIRST=EVICT_FIRST, STREAM_STORE=STREAM_STORE,
                         num_warps=num_warps)

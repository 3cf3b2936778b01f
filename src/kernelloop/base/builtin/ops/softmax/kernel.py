"""Softmax forward over the last axis, one program per ROWS rows.

When one block covers the row (SINGLE) the row stays in registers: max, exp, sum, divide;
one read, one write. Otherwise the row is streamed in BLOCK_N pieces with an online softmax:
pass 1 keeps a per-lane running max and a per-lane sum rescaled whenever the max grows
(combined across lanes once at the end), pass 2 writes exp(x - max) / sum (two reads, the
second usually hits L2; EVICT_FIRST applies to the last read).

Masked lanes load -inf so they never win the max and contribute exp(-inf) = 0 to the sum.
A max of -inf (a row of -inf, or a row past M) is replaced by 0 before subtracting so that
no -inf - -inf = nan is formed; such a row gives 0 / 0 = nan like torch.softmax.
"""

import triton
import triton.language as tl


@triton.jit
def _softmax_fwd(X, Y, M, N, stride_x, stride_y,
                 BLOCK_N: tl.constexpr, ROWS: tl.constexpr, SINGLE: tl.constexpr,
                 EVICT_FIRST: tl.constexpr, STREAM_STORE: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    if SINGLE:
        cmask = cols < N
        for r in tl.static_range(ROWS):
            row = pid * ROWS + r
            mask = cmask & ((cols * 0 + row) < M)
            if EVICT_FIRST:
                x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf"),
                            eviction_policy="evict_first")
            else:
                x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf"))
            x = x.to(tl.float32)
            mx = tl.max(x, axis=0)
            mx = tl.where(mx == -float("inf"), 0.0, mx)
            e = tl.exp(x - mx)
            y = e * (1.0 / tl.sum(e, axis=0))
            if STREAM_STORE:  # streaming store (.cs): the output is not re-read, keep it out of L2
                tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask, cache_modifier=".cs")
            else:
                tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
    else:
        row = pid
        xrow = X + row * stride_x
        m_i = tl.full([BLOCK_N], -float("inf"), dtype=tl.float32)
        s_i = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            x = tl.load(xrow + c, mask=c < N, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m_i, x)
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            s_i = s_i * tl.exp(m_i - m_safe) + tl.exp(x - m_safe)
            m_i = m_new
        mx = tl.max(m_i, axis=0)
        mx = tl.where(mx == -float("inf"), 0.0, mx)
        inv = 1.0 / tl.sum(s_i * tl.exp(m_i - mx), axis=0)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            m = c < N
            if EVICT_FIRST:
                x = tl.load(xrow + c, mask=m, other=-float("inf"), eviction_policy="evict_first")
            else:
                x = tl.load(xrow + c, mask=m, other=-float("inf"))
            y = tl.exp(x.to(tl.float32) - mx) * inv
            if STREAM_STORE:  # streaming store (.cs): the output is not re-read, keep it out of L2
                tl.store(Y + row * stride_y + c, y.to(Y.dtype.element_ty), mask=m, cache_modifier=".cs")
            else:
                tl.store(Y + row * stride_y + c, y.to(Y.dtype.element_ty), mask=m)


def launch(x, y, *, BLOCK_N, ROWS, num_warps, EVICT_FIRST=0, STREAM_STORE=0):
    M, N = x.shape
    single = BLOCK_N >= N
    rows = ROWS if single else 1
    grid = (triton.cdiv(M, rows),)
    _softmax_fwd[grid](x, y, M, N, x.stride(0), y.stride(0),
                       BLOCK_N=BLOCK_N, ROWS=rows, SINGLE=single, EVICT_FIRST=EVICT_FIRST, STREAM_STORE=STREAM_STORE,
                       num_warps=num_warps)

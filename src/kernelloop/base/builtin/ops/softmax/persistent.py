"""Softmax forward over the last axis, persistent.

A grid of PROGRAMS_PER_SM programs per SM (never more programs than rows); program p handles rows p, p + G,
p + 2G, ... (G programs), so at any moment the rows in flight are neighbours in memory. The whole row lives in
registers as one block of next_pow2(N) lanes: max, exp, sum, divide; one DRAM read, one write. With PREFETCH the
next row's load is issued before the current row is reduced and stored, so a program always has a row read in
flight while it computes (register double buffering).

Masked lanes load -inf so they never win the max and contribute exp(-inf) = 0 to the sum; a row of -inf gives
0 / 0 = nan like torch.softmax (its max is replaced by 0 so that no -inf - -inf is formed).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x):
    x = x.to(tl.float32)
    mx = tl.max(x, axis=0)
    mx = tl.where(mx == -float("inf"), 0.0, mx)
    e = tl.exp(x - mx)
    return e * (1.0 / tl.sum(e, axis=0))


@triton.jit
def _softmax_persistent(X, Y, M, N, stride_x, stride_y, BLOCK_N: tl.constexpr, PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    if PREFETCH:
        x = tl.load(X + tl.cast(pid, tl.int64) * stride_x + cols, mask=cmask, other=-float("inf"))
        for row in range(pid, M, nprog):
            nxt = row + nprog
            xn = tl.load(X + tl.cast(nxt, tl.int64) * stride_x + cols, mask=cmask & ((cols * 0 + nxt) < M), other=-float("inf"))
            y = _softmax_row(x)
            tl.store(Y + tl.cast(row, tl.int64) * stride_y + cols, y.to(Y.dtype.element_ty), mask=cmask)
            x = xn
    else:
        for row in range(pid, M, nprog):
            x = tl.load(X + tl.cast(row, tl.int64) * stride_x + cols, mask=cmask, other=-float("inf"))
            y = _softmax_row(x)
            tl.store(Y + tl.cast(row, tl.int64) * stride_y + cols, y.to(Y.dtype.element_ty), mask=cmask)


def _programs(t, rows, per_sm):
    """Programs of the persistent launch: PROGRAMS_PER_SM per SM, at most one per row."""
    sms = torch.cuda.get_device_properties(t.device).multi_processor_count if t.is_cuda else 4
    return max(1, min(rows, sms * per_sm))


def launch(x, y, *, PROGRAMS_PER_SM=4, num_warps=8, PREFETCH=1):
    M, N = x.shape
    if M == 0 or N == 0:
        return
    _softmax_persistent[(_programs(x, M, PROGRAMS_PER_SM),)](
        x, y, M, N, x.stride(0), y.stride(0),
        BLOCK_N=triton.next_power_of_2(N), PREFETCH=PREFETCH, num_warps=num_warps)

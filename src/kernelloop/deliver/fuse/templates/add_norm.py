"""Residual add + norm, one program per ROWS rows of [M, N]: s = a + b (rounded to the model's dtype, as the model
stores it), y = norm(s) * weight (+ bias) with RMSNorm (NORM "rms") or LayerNorm (NORM "layer") in fp32, stored
once. With STORE_SUM the sum is written too (the model uses it again as the next residual); ROUND_NORMED rounds
the normalised row to the model's dtype before the weight multiplies it, as transformers' Llama RMSNorm does;
OFFSET is added to the weight in fp32 first (Gemma's RMSNorm scales by (1 + weight): OFFSET 1.0).
The row stays in registers (one block of BLOCK_N >= N lanes): each input read once, each output written once.

launch(a, b, weight, [bias], [s], y, *, eps, BLOCK_N, ROWS, num_warps, NORM, HAS_BIAS, STORE_SUM, ROUND_NORMED,
       OFFSET=0.0)
"""

import triton
import triton.language as tl

# {COMMON}

@triton.jit
def _add_norm_fwd(A, B, W, Bias, S, Y, M, N, eps,
                  BLOCK_N: tl.constexpr, ROWS: tl.constexpr, RMS: tl.constexpr, HAS_BIAS: tl.constexpr,
                  STORE_SUM: tl.constexpr, ROUND_NORMED: tl.constexpr, OFFSET: tl.constexpr,
                  INTERPRETER: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    dtype: tl.constexpr = Y.dtype.element_ty
    w = tl.load(W + cols, mask=cmask, other=0.0).to(tl.float32)
    if OFFSET != 0.0:
        w = w + OFFSET
    if HAS_BIAS:
        bias = tl.load(Bias + cols, mask=cmask, other=0.0).to(tl.float32)
    for r in tl.static_range(ROWS):
        row = (pid * ROWS + r).to(tl.int64)
        mask = cmask & ((cols * 0 + row) < M)
        off = row * N + cols
        a = tl.load(A + off, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(B + off, mask=mask, other=0.0).to(tl.float32)
        s = _round(a + b, dtype, INTERPRETER)
        if STORE_SUM:
            tl.store(S + off, s, mask=mask)
        x = s.to(tl.float32)
        if RMS:
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
            xn = x * rstd
        else:
            mean = tl.sum(x, axis=0) / N
            xc = tl.where(cmask, x - mean, 0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
            xn = xc * rstd
        if ROUND_NORMED:
            xn = _round(xn, dtype, INTERPRETER).to(tl.float32)
        y = xn * w
        if HAS_BIAS:
            y = y + bias
        tl.store(Y + off, _round(y, dtype, INTERPRETER), mask=mask)


def launch(*tensors, eps, BLOCK_N, ROWS, num_warps, NORM, HAS_BIAS, STORE_SUM, ROUND_NORMED, OFFSET=0.0):
    a, b, weight = tensors[:3]
    rest = list(tensors[3:])
    bias = rest.pop(0) if HAS_BIAS else None
    s = rest.pop(0) if STORE_SUM else None
    (y,) = rest
    M, N = a.shape
    if BLOCK_N < N:
        raise ValueError(f"BLOCK_N={BLOCK_N} < N={N}: the row is one block")
    grid = (triton.cdiv(M, ROWS),)
    _add_norm_fwd[grid](a, b, weight, weight if bias is None else bias, y if s is None else s, y, M, N, eps,
                        BLOCK_N=BLOCK_N, ROWS=ROWS, RMS=NORM == "rms", HAS_BIAS=bool(HAS_BIAS),
                        STORE_SUM=bool(STORE_SUM), ROUND_NORMED=bool(ROUND_NORMED), OFFSET=float(OFFSET),
                        INTERPRETER=not a.is_cuda,
                        num_warps=num_warps)

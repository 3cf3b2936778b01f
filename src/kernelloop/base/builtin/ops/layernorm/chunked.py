"""LayerNorm forward, "chunk-resident": the row is held in registers as NCHUNK statically unrolled chunks.

(Written through the outside-agent mode and measured on the H200 there -- examples/agent-dogfood/ -- then adopted
as this op's second template.)

The row template (ops/layernorm/kernel.py) rounds the row up to one power-of-two block: N=5000 becomes an
8192-lane block, 39 % of it masked off and 8192 fp32 values held per row. Here the row is cut into
NCHUNK = cdiv(N, CHUNK) chunks of a power-of-two CHUNK, unrolled at compile time and kept in registers as a
tuple: N=5000 is 5 x 1024 lanes (2.3 % masked) and only the last chunk carries a mask -- the others are plain,
fully vectorized loads and stores. Statistics are two-pass in registers (exact mean, then the centred sum of
squares), with a single DRAM read of the row and a single write.

Vector width. Triton only proves 16-byte alignment of a row start when the row stride is a multiple of 16
elements, which N=5000 is not. The launcher passes VEC, the largest power of two (<= 16) dividing both row
strides and N, and the kernel asserts it with tl.multiple_of on the row base and on the tail length, so a
5000-element fp16 row still moves as 16-byte vectors and the masked tail chunk is vectorized too.

Rows that do not fit (more than MAX_CHUNKS chunks, or more than MAX_PER_THREAD fp32 values per thread) take
the streaming path: one pass over the row in CHUNK pieces combining per-chunk (count, mean, M2) with Chan's
parallel Welford update, then one pass to normalise (two reads of the row instead of the template's three).

Config: CHUNK (power of two, clamped to next_pow2(N)), ROWS (rows per program, register-resident path only),
WB_FIRST (1: weight and bias loaded once per program and held beside the rows; 0: re-read per row, from L1/L2),
num_warps.
"""

import triton
import triton.language as tl

MAX_CHUNKS = 32          # unrolled chunks per row (compile time and code size)
MAX_PER_THREAD = 64      # fp32 row values held per thread before the streaming path is taken


@triton.jit
def _load(ptrs, mask, MASKED: tl.constexpr):
    """A chunk's load: masked only for the row's last, partial chunk."""
    if MASKED:
        v = tl.load(ptrs, mask=mask, other=0.0)
    else:
        v = tl.load(ptrs)
    return v


@triton.jit
def _store(ptrs, v, mask, MASKED: tl.constexpr):
    if MASKED:
        tl.store(ptrs, v, mask=mask)
    else:
        tl.store(ptrs, v)


@triton.jit
def _ln_resident(X, W, B, Y, M, N, stride_x, stride_y, eps,
                 CHUNK: tl.constexpr, NCHUNK: tl.constexpr, TAIL: tl.constexpr, ROWS: tl.constexpr,
                 VEC: tl.constexpr, WB_FIRST: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, CHUNK)
    # valid lanes of the last chunk: a multiple of VEC, so its masked accesses stay vectorized. (VEC == 1 when
    # N == 1, which Triton passes as a constexpr: no hint can be put on a constant.)
    rem = N - (NCHUNK - 1) * CHUNK
    if VEC > 1:
        rem = tl.multiple_of(rem, VEC)
    tmask = cols < rem
    if WB_FIRST:  # weight and bias once per program, kept in their own dtype beside the rows
        wt = ()
        bt = ()
        for c in tl.static_range(NCHUNK):
            wt = wt + (_load(W + c * CHUNK + cols, tmask, TAIL and c == NCHUNK - 1),)
            bt = bt + (_load(B + c * CHUNK + cols, tmask, TAIL and c == NCHUNK - 1),)
    for r in tl.static_range(ROWS):
        # the last program's extra rows recompute (and rewrite, identically) row M-1: no row mask needed
        row = tl.minimum(pid * ROWS + r, M - 1).to(tl.int64)
        xrow = X + tl.multiple_of(row * stride_x, VEC)
        yrow = Y + tl.multiple_of(row * stride_y, VEC)
        # one read of the row: NCHUNK chunks held in registers (a tuple, unrolled at compile time)
        xs = ()
        acc = tl.zeros([CHUNK], dtype=tl.float32)
        for c in tl.static_range(NCHUNK):
            x = _load(xrow + c * CHUNK + cols, tmask, TAIL and c == NCHUNK - 1).to(tl.float32)
            acc += x
            xs = xs + (x,)
        mean = tl.sum(acc, axis=0) / N
        # two-pass variance from the registers: exact centring, masked lanes of the tail excluded
        acc = tl.zeros([CHUNK], dtype=tl.float32)
        for c in tl.static_range(NCHUNK):
            d = xs[c] - mean
            if TAIL and c == NCHUNK - 1:
                d = tl.where(tmask, d, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for c in tl.static_range(NCHUNK):
            if WB_FIRST:
                w = wt[c].to(tl.float32)
                b = bt[c].to(tl.float32)
            else:
                w = _load(W + c * CHUNK + cols, tmask, TAIL and c == NCHUNK - 1).to(tl.float32)
                b = _load(B + c * CHUNK + cols, tmask, TAIL and c == NCHUNK - 1).to(tl.float32)
            y = (xs[c] - mean) * rstd * w + b
            _store(yrow + c * CHUNK + cols, y.to(Y.dtype.element_ty), tmask, TAIL and c == NCHUNK - 1)


@triton.jit
def _ln_streaming(X, W, B, Y, M, N, stride_x, stride_y, eps, CHUNK: tl.constexpr, VEC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xrow = X + tl.multiple_of(row * stride_x, VEC)
    yrow = Y + tl.multiple_of(row * stride_y, VEC)
    cols = tl.arange(0, CHUNK)
    count = tl.zeros([], dtype=tl.float32)
    mean = tl.zeros([], dtype=tl.float32)
    m2 = tl.zeros([], dtype=tl.float32)
    for start in range(0, N, CHUNK):
        left = N - start
        if VEC > 1:
            left = tl.multiple_of(left, VEC)
        m = cols < left
        x = tl.load(xrow + start + cols, mask=m, other=0.0).to(tl.float32)
        n = tl.minimum(left, CHUNK).to(tl.float32)
        cmean = tl.sum(x, axis=0) / n
        d = tl.where(m, x - cmean, 0.0)
        cm2 = tl.sum(d * d, axis=0)
        total = count + n
        delta = cmean - mean
        mean = mean + delta * (n / total)
        m2 = m2 + cm2 + delta * delta * (count * n / total)
        count = total
    rstd = 1.0 / tl.sqrt(m2 / N + eps)
    for start in range(0, N, CHUNK):
        left = N - start
        if VEC > 1:
            left = tl.multiple_of(left, VEC)
        m = cols < left
        x = tl.load(xrow + start + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(W + start + cols, mask=m, other=0.0).to(tl.float32)
        b = tl.load(B + start + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(yrow + start + cols, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=m)


def _pow2_factor(v: int) -> int:
    """The largest power of two dividing v, at most 16 (0 divides by anything)."""
    return 16 if v == 0 else min(16, v & -v)


def launch(x, weight, bias, y, *, eps, CHUNK=1024, ROWS=1, num_warps=4, WB_FIRST=0):
    M, N = x.shape
    if M == 0 or N == 0:
        return
    chunk = min(CHUNK, triton.next_power_of_2(N))
    nchunk = triton.cdiv(N, chunk)
    vec = min(_pow2_factor(x.stride(0)), _pow2_factor(y.stride(0)), _pow2_factor(N))
    if nchunk <= MAX_CHUNKS and nchunk * chunk <= MAX_PER_THREAD * 32 * num_warps:
        rows = max(1, min(ROWS, M))
        _ln_resident[(triton.cdiv(M, rows),)](
            x, weight, bias, y, M, N, x.stride(0), y.stride(0), eps,
            CHUNK=chunk, NCHUNK=nchunk, TAIL=N % chunk != 0, ROWS=rows, VEC=vec, WB_FIRST=WB_FIRST,
            num_warps=num_warps)
    else:
        _ln_streaming[(M,)](x, weight, bias, y, M, N, x.stride(0), y.stride(0), eps,
                            CHUNK=chunk, VEC=vec, num_warps=num_warps)

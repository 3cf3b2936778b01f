"""GEMM for few rows (decode): c = act(a @ b [+ bias]) computed as c^T = b^T a^T, fp32 accumulation.

With M = 1..128 tokens, a normal tile puts the tokens on the MMA's M side: a 16-row tile wastes 15/16 of an M = 1
MMA, and tiles under 64 rows cannot use Hopper's warpgroup MMA at all (its M is 64 rows a warpgroup). Here the
operands trade places: each program streams a [BLOCK_N, BLOCK_K] tile of the weight b (its N rows are the MMA's M
side, 64 to 256 rows) through a `num_stages`-deep pipeline and multiplies it by the [BLOCK_K, BLOCK_M] tile of a^T
(the few tokens are the MMA's narrow N side, 16 to 128), so the fp32 accumulator is the [BLOCK_N, BLOCK_M] tile of
c^T. The weight is read once per BLOCK_M tokens; a decode step's GEMM is a stream of the weight through HBM.

Split-K (SPLIT_K > 1) gives the few output tiles of a decode shape enough programs to keep HBM busy: program
(split, tile) reduces one k-range. The partial tiles are reduced inside the same kernel, with no second launch and
no spinning: each program stores its fp32 partial tile into the workspace (`scratch`: plane `split` of [SPLIT_K, M,
N], only the real rows and columns), then counts itself in on the tile's 64-bit arrival counter with one
compare-and-swap (release after a barrier over the program's stores, acquire for what it reads next). The program
that arrives last adds the SPLIT_K planes in split order, applies the epilogue once, rounds once and stores c. Who
arrives last varies; the order of the additions does not: c is bitwise deterministic for every SPLIT_K.

The workspace holds anything when a call starts (the harness poisons it before every call). The counter is
therefore tagged: its high bits hold this call's token (drawn from the OS's entropy, below 2^51) and its low 8 bits
the arrivals; a program that finds another tag counts itself as the first. The poison pattern's high bits exceed
2^54, so they never read as a token, and a counter left by an earlier call matches this call's token with odds of
2^-49. The last to arrive also sets the counter back to 0, so a launch replayed with the same tag (a CUDA graph)
starts from a clear counter too.

TMA=1 loads the a and b tiles through host-built tensor descriptors (sm_90; out-of-bounds rows and k zero-filled);
TMA=0 through pointers (rows past M or N wrap onto valid ones, never stored; k masked when not EVEN_K). c and the
partial tiles are always stored through masked pointers (c^T's tile is transposed to c's rows, and it is small).
TRANS_B: 0 when b is [K, N], 1 when b is [N, K] (an nn.Linear weight).
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

_ACTIVATIONS = {"none": 0, "bias": 0, "bias_gelu": 1, "bias_silu": 2}


@triton.jit
def _mma(w, x, acc, INTERPRETER: tl.constexpr):
    """acc + w @ x in fp32: the weight tile on the MMA's M side, the tokens on its N side. In the CPU interpreter the
    operands are widened to fp32 first, exactly (triton 3.9's interpreter multiplies bf16 as uint16 bit patterns)."""
    if INTERPRETER:
        return tl.dot(w.to(tl.float32), x.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(w, x, acc)


@triton.jit
def _round(acc, dtype: tl.constexpr, INTERPRETER: tl.constexpr):
    """The fp32 tile in c's dtype, rounded to nearest even as a GPU does (the CPU interpreter truncates fp32 ->
    bf16, so there the rounding increment is added to the bits first; acc is finite)."""
    if INTERPRETER and dtype == tl.bfloat16:
        bits = acc.to(tl.uint32, bitcast=True)
        acc = (bits + 0x7FFF + ((bits >> 16) & 1)).to(tl.float32, bitcast=True)
    return acc.to(dtype)


@triton.jit
def _finish(acc, Bias, C, offs_n, offs_m, mask, N, stride_cm, stride_cn, HAS_BIAS: tl.constexpr,
            ACT: tl.constexpr, INTERPRETER: tl.constexpr):
    """The finished [BLOCK_N, BLOCK_M] tile of c^T: + bias (one value per row of c^T), the activation, one rounding,
    stored transposed into c."""
    if HAS_BIAS:
        acc += tl.load(Bias + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[:, None]
    if ACT == 1:  # exact GELU: 0.5 x (1 + erf(x / sqrt(2)))
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    elif ACT == 2:  # SiLU: x * sigmoid(x)
        acc = acc / (1.0 + tl.exp(-acc))
    c_ptrs = C + offs_m[None, :] * stride_cm + offs_n[:, None] * stride_cn
    tl.store(c_ptrs, _round(acc, C.dtype.element_ty, INTERPRETER), mask=mask)


@triton.jit
def _swapab_kernel(A, B, Bias, C, W, Counters, token, M, N, K, k_span,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                   EVEN_K: tl.constexpr, TMA: tl.constexpr, TRANS_B: tl.constexpr, HAS_BIAS: tl.constexpr,
                   ACT: tl.constexpr, INTERPRETER: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # the token tiles vary fastest: programs multiplying the same weight tile run side by side (one read from HBM,
    # the others from L2); then the weight tiles; the k-ranges slowest
    pid_m = pid % num_m
    tile = pid % (num_m * num_n)
    pid_n = tile // num_m
    split = pid // (num_m * num_n)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k_lo = split * k_span
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if TMA:
        for k in range(k_lo, k_lo + k_span, BLOCK_K):
            if TRANS_B:
                w = B.load([off_n, k])
            else:
                w = B.load([k, off_n]).T
            acc = _mma(w, A.load([off_m, k]).T, acc, INTERPRETER)
    else:
        rn = (off_n + tl.arange(0, BLOCK_N)) % N
        rm = (off_m + tl.arange(0, BLOCK_M)) % M
        rk = k_lo + tl.arange(0, BLOCK_K)
        w_ptrs = B + rn[:, None] * stride_bn + rk[None, :] * stride_bk
        x_ptrs = A + rk[:, None] * stride_ak + rm[None, :] * stride_am
        for k in range(k_lo, k_lo + k_span, BLOCK_K):
            if EVEN_K:
                w = tl.load(w_ptrs)
                x = tl.load(x_ptrs)
            else:
                kk = k + tl.arange(0, BLOCK_K)
                w = tl.load(w_ptrs, mask=kk[None, :] < K, other=0.0)
                x = tl.load(x_ptrs, mask=kk[:, None] < K, other=0.0)
            acc = _mma(w, x, acc, INTERPRETER)
            w_ptrs += BLOCK_K * stride_bk
            x_ptrs += BLOCK_K * stride_ak
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_m = off_m + tl.arange(0, BLOCK_M)
    mask = (offs_n[:, None] < N) & (offs_m[None, :] < M)
    if SPLIT_K == 1:
        _finish(acc, Bias, C, offs_n, offs_m, mask, N, stride_cm, stride_cn, HAS_BIAS, ACT, INTERPRETER)
    else:
        # this k-range's partial tile, into plane `split` of the [SPLIT_K, M, N] workspace
        plane = offs_m[None, :] * N + offs_n[:, None]
        tl.store(W + split * M * N + plane, acc, mask=mask)
        tl.debug_barrier()  # every thread's partial stored before the counter's release
        counter = Counters + tile
        tag = token << 8
        seen = tl.atomic_cas(counter, tag, tag, sem="relaxed", scope="gpu")  # an atomic read
        mine = tl.where((seen >> 8) == token, seen + 1, tag + 1)
        old = tl.atomic_cas(counter, seen, mine, sem="acq_rel", scope="gpu")
        while old != seen:
            seen = old
            mine = tl.where((seen >> 8) == token, seen + 1, tag + 1)
            old = tl.atomic_cas(counter, seen, mine, sem="acq_rel", scope="gpu")
        if mine - tag == SPLIT_K:
            # the last to arrive: every other partial is published. It clears the counter for the next call (a
            # CUDA graph replays this launch with the same tag)
            tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")
            # Then it adds the planes in split order, one at a time (unrolled or software-pipelined, the loop
            # would hold several planes in registers at once and spill)
            total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in tl.range(0, SPLIT_K, num_stages=1):
                total += tl.load(W + s * M * N + plane, mask=mask, other=0.0, cache_modifier=".cg")
            _finish(total, Bias, C, offs_n, offs_m, mask, N, stride_cm, stride_cn, HAS_BIAS, ACT, INTERPRETER)


def workspace_numel(M, N, SPLIT_K, BLOCK_M, BLOCK_N):
    """fp32 elements the launch needs in `scratch`: SPLIT_K partial planes of c, then one 64-bit counter per output
    tile (at an even offset; 0 without split-K)."""
    if SPLIT_K == 1:
        return 0
    planes = SPLIT_K * M * N
    return planes + planes % 2 + 2 * triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)


def launch(a, b, x, y=None, *, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT_K=1, TMA=0,
           EPILOGUE="none", TRANS_B=0, scratch=None):
    """c = act(a @ b [+ bias]) (b.T when TRANS_B): called as launch(a, b, c) or launch(a, b, bias, c). With
    SPLIT_K > 1, `scratch` (fp32, contiguous) holds the partial planes and the tiles' counters
    (`workspace_numel`)."""
    bias, c = (None, x) if y is None else (x, y)
    if (bias is None) != (EPILOGUE == "none"):
        raise ValueError(f"EPILOGUE={EPILOGUE!r} does not match the {'absence' if bias is None else 'presence'} "
                         "of a bias tensor")
    if SPLIT_K < 1 or SPLIT_K > 255:
        raise ValueError(f"SPLIT_K={SPLIT_K}: the tile counters count 1 to 255 arrivals")
    M, K = a.shape
    N = b.shape[0] if TRANS_B else b.shape[1]
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    w_arg, counters, token = c, c, 0
    if SPLIT_K > 1:
        need = workspace_numel(M, N, SPLIT_K, BLOCK_M, BLOCK_N)
        if SPLIT_K * M * N >= 2 ** 31:
            raise ValueError(f"SPLIT_K * M * N = {SPLIT_K * M * N}: the partial planes are indexed in 32 bits")
        if scratch is None or scratch.dtype != torch.float32 or not scratch.is_contiguous() \
                or scratch.numel() < need:
            raise ValueError(f"SPLIT_K={SPLIT_K} needs a contiguous fp32 scratch of at least {need} elements "
                             f"(the partial planes and a counter per tile; got "
                             f"{'none' if scratch is None else f'{scratch.numel()} {scratch.dtype}'})")
        w_arg = scratch
        counters = scratch[need - 2 * tiles:need].view(torch.int64)
        # this call's counter tag, drawn by a generator of its own (torch's global one is left alone): in
        # [2^40, 2^51), never the poison pattern's high bits; odd, so Triton's specialization of integer arguments
        # (divisible by 16 or not) is the same for every call and the kernel never compiles again for a new tag
        token = (torch.Generator().seed() % 2 ** 50 | 1) + 2 ** 40
    stride_bk, stride_bn = (b.stride(1), b.stride(0)) if TRANS_B else (b.stride(0), b.stride(1))
    if TMA:
        a_arg = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K])
        b_arg = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K] if TRANS_B else [BLOCK_K, BLOCK_N])
    else:
        a_arg, b_arg = a, b
    k_span = triton.cdiv(triton.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K
    _swapab_kernel[(tiles * SPLIT_K,)](
        a_arg, b_arg, c if bias is None else bias, c, w_arg, counters, token, M, N, K, k_span,
        a.stride(0), a.stride(1), stride_bk, stride_bn, c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, SPLIT_K=SPLIT_K, EVEN_K=K % (BLOCK_K * SPLIT_K) == 0,
        TMA=TMA, TRANS_B=TRANS_B, HAS_BIAS=bias is not None, ACT=_ACTIVATIONS[EPILOGUE],
        INTERPRETER=not a.is_cuda, num_warps=num_warps, num_stages=num_stages)

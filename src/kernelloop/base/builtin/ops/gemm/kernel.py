"""GEMM with a fused epilogue: C = act(A @ B [+ bias]), fp32 accumulation. Shared by every ops/gemm* folder.

One template, pinned per op by two single-valued parameters of its spec:
- EPILOGUE: "none" | "bias" | "bias_gelu" (exact erf GELU, as F.gelu) | "bias_silu" (x * sigmoid(x));
- TRANS_B: 0 when b is [K, N] (row-major B), 1 when b is [N, K] (an nn.Linear weight: C = A @ B.T).

Scheduling: one output tile per program (PERSISTENT=0), or a grid of one program per SM looping over the
tiles (PERSISTENT=1); tiles are visited in GROUP_M-row super-groups so neighbouring programs share the same
B columns and A rows in L2. TMA=1 loads A/B tiles (and stores C) through host-built tensor descriptors
(Hopper's tensor memory accelerator; no device-side scratch allocator is needed, unlike
`tl.make_tensor_descriptor`); TMA=2 does the same but stores the C tile as two halves (epilogue subtiling), so
its staging buffer in shared memory is half the tile: a 128x256x64 persistent tile then fits four pipeline stages
(229,408 bytes built for sm_90) instead of three.

FLATTEN=1 (a launch option, not in the searched space) fuses the persistent grid's tile loop with its k-loop
(`tl.range(..., flatten=True)`), so the software pipeline runs across tile boundaries. In an earlier H200 run's
kernel records on the H200 (benchmarks/gemm_kernels.py --shapes large, Triton 3.6) 128x256x64 persistent tiles took
7.5 % longer with it at 8192x14336x4096, 3 % less time at 512x28672x8192 and the same at 4096^3 and 8192x4096x4096,
so the space leaves it out.

WS=1 (the "persistent_ws" template) is Hopper warp specialization: a persistent grid whose tile loop carries
`tl.range(..., warp_specialize=True)`, with device-side tensor descriptors (`tl.make_tensor_descriptor`; their
scratch comes from the harness's `triton.set_allocator`). Triton 3.6 then splits each program into a producer warp
group (TMA loads) and two consumer warp groups (64-row halves of the tile: MMAs and the epilogue), so one tile's
epilogue overlaps the next tile's loads; it does so only at 4 warps and only with device descriptors. The
epilogue's tile index is carried separately from the loop's, as a scheduling hint.

Split-K (SPLIT_K > 1, no epilogue) splits the reduction across programs, two ways:
- fp32 output (gemm_f32out): the programs add their fp32 partial tiles into the zeroed output with atomics; only
  SPLIT_K=2 is bitwise deterministic (two addends commute; three do not associate);
- fp16/bf16 output (gemm's "splitk" template): each program stores its fp32 partial tile into the harness's
  workspace (`scratch`, SPLIT_K * M * N floats), then a second kernel adds the partials of each element in split
  order, rounds once and stores c: deterministic for any SPLIT_K, and c is rounded once, as without split-K.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

_ACTIVATIONS = {"none": 0, "bias": 0, "bias_gelu": 1, "bias_silu": 2}


@triton.jit
def _tile_of(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of a linear tile index, GROUP_M tile-rows at a time (L2 reuse of B's columns)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@triton.jit
def _mma(a, b, acc, INTERPRETER: tl.constexpr):
    """acc + a @ b with fp32 accumulation. In the CPU interpreter (never on a GPU) the operands are widened to fp32
    first, exactly: triton 3.9's interpreter multiplies bf16 operands as their uint16 bit patterns."""
    if INTERPRETER:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _to_out(acc, dtype: tl.constexpr, INTERPRETER: tl.constexpr):
    """The fp32 tile in the output's dtype, rounded to nearest even as a GPU does. The CPU interpreter truncates
    fp32 -> bf16, so there the rounding increment is added to the bits first (acc is finite)."""
    if dtype == tl.float32:
        return acc
    else:
        if INTERPRETER and dtype == tl.bfloat16:
            bits = acc.to(tl.uint32, bitcast=True)
            acc = (bits + 0x7FFF + ((bits >> 16) & 1)).to(tl.float32, bitcast=True)
        return acc.to(dtype)


@triton.jit
def _epilogue(acc, Bias, offs_n, N, HAS_BIAS: tl.constexpr, ACT: tl.constexpr):
    """+ bias (broadcast over rows), then the activation, on the fp32 tile."""
    if HAS_BIAS:
        acc += tl.load(Bias + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    if ACT == 1:  # exact GELU: 0.5 x (1 + erf(x / sqrt(2)))
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    elif ACT == 2:  # SiLU: x * sigmoid(x); exp overflow to inf gives -0.0 for very negative x, never NaN
        acc = acc / (1.0 + tl.exp(-acc))
    return acc


@triton.jit
def _accumulate(A, B, off_m, off_n, k_lo, k_hi, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
                TMA: tl.constexpr, TRANS_B: tl.constexpr, INTERPRETER: tl.constexpr):
    """The fp32 tile at (off_m, off_n) summed over k in [k_lo, k_hi) (a multiple of BLOCK_K from k_lo; only the end
    of K itself needs masking, and only when not EVEN_K)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA:
        # Out-of-bounds rows, columns and k are zero-filled by the copy engine: no masks.
        for k in range(k_lo, k_hi, BLOCK_K):
            a = A.load([off_m, k])
            if TRANS_B:
                b = B.load([off_n, k]).T
            else:
                b = B.load([k, off_n])
            acc = _mma(a, b, acc, INTERPRETER)
    else:
        # Rows past M / columns past N wrap onto valid ones (never stored), so only k needs a mask.
        rm = (off_m + tl.arange(0, BLOCK_M)) % M
        rn = (off_n + tl.arange(0, BLOCK_N)) % N
        offs_k = k_lo + tl.arange(0, BLOCK_K)
        a_ptrs = A + rm[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = B + offs_k[:, None] * stride_bk + rn[None, :] * stride_bn
        for k in range(k_lo, k_hi, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                kk = k + tl.arange(0, BLOCK_K)
                a = tl.load(a_ptrs, mask=kk[None, :] < K, other=0.0)
                b = tl.load(b_ptrs, mask=kk[:, None] < K, other=0.0)
            acc = _mma(a, b, acc, INTERPRETER)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def _store_tile(acc, C, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                TMA: tl.constexpr, INTERPRETER: tl.constexpr):
    """The finished fp32 tile, rounded once to c's dtype, stored at (off_m, off_n): through the tensor descriptor
    C (TMA; in two halves with TMA = 2) or through pointers, masked to M x N."""
    if TMA:
        out = _to_out(acc, C.dtype, INTERPRETER)
        if TMA == 2:
            # the c tile stored as two [BLOCK_M, BLOCK_N / 2] halves: the staging buffer in shared memory is half
            # the tile, which leaves room for one more pipeline stage of a and b at 128x256
            left, right = tl.split(tl.permute(tl.reshape(out, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            C.store([off_m, off_n], left)
            C.store([off_m, off_n + BLOCK_N // 2], right)
        else:
            C.store([off_m, off_n], out)
    else:
        offs_m = off_m + tl.arange(0, BLOCK_M)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        c_ptrs = C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        out = _to_out(acc, C.dtype.element_ty, INTERPRETER)
        tl.store(c_ptrs, out, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _gemm_work(work, A, B, Bias, C, M, N, K, k_span, num_m, num_n,
               stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, TMA: tl.constexpr, TRANS_B: tl.constexpr,
               HAS_BIAS: tl.constexpr, ACT: tl.constexpr, PARTIALS: tl.constexpr, INTERPRETER: tl.constexpr):
    """One unit of work: the k-range `split` of output tile `tile` (work = split * tiles + tile)."""
    num_tiles = num_m * num_n
    tile = work % num_tiles
    split = work // num_tiles
    pid_m, pid_n = _tile_of(tile, num_m, num_n, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    # k-range [k_lo, k_lo + k_span): k_span is a multiple of BLOCK_K, so only the end of K needs masking
    k_lo = split * k_span
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    acc = _accumulate(A, B, off_m, off_n, k_lo, k_lo + k_span, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, TMA, TRANS_B, INTERPRETER)
    acc = _epilogue(acc, Bias, offs_n, N, HAS_BIAS, ACT)
    if SPLIT_K > 1 and PARTIALS:
        # this k-range's fp32 partial tile, into plane `split` of the [SPLIT_K, M, N] workspace
        w_ptrs = C + split * M * N + offs_m[:, None] * N + offs_n[None, :]
        tl.store(w_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    elif SPLIT_K > 1:
        c_ptrs = C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.atomic_add(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N), sem="relaxed")
    else:
        _store_tile(acc, C, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, TMA, INTERPRETER)


@triton.jit
def _gemm_kernel(A, B, Bias, C, M, N, K, k_span, num_programs,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                 SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, PERSISTENT: tl.constexpr, TMA: tl.constexpr,
                 TRANS_B: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, PARTIALS: tl.constexpr,
                 FLATTEN: tl.constexpr, INTERPRETER: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    if PERSISTENT and FLATTEN:
        # the tile loop and its k-loop fused into one loop, software-pipelined across tile boundaries: the next
        # tile's first loads are in flight during this tile's last MMAs and epilogue (`flatten` is only spelled
        # out when asked for, so a Triton without it fails those configurations alone)
        for work in tl.range(pid, num_m * num_n * SPLIT_K, num_programs, flatten=True):
            _gemm_work(work, A, B, Bias, C, M, N, K, k_span, num_m, num_n,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLIT_K, EVEN_K, TMA, TRANS_B, HAS_BIAS, ACT, PARTIALS,
                       INTERPRETER)
    elif PERSISTENT:
        for work in range(pid, num_m * num_n * SPLIT_K, num_programs):
            _gemm_work(work, A, B, Bias, C, M, N, K, k_span, num_m, num_n,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLIT_K, EVEN_K, TMA, TRANS_B, HAS_BIAS, ACT, PARTIALS,
                       INTERPRETER)
    else:
        _gemm_work(pid, A, B, Bias, C, M, N, K, k_span, num_m, num_n,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLIT_K, EVEN_K, TMA, TRANS_B, HAS_BIAS, ACT, PARTIALS,
                       INTERPRETER)


@triton.jit
def _owner(it, num_programs, sk_iters):
    """The program whose stream-K range [p * sk_iters // P, (p + 1) * sk_iters // P) holds k-step `it`."""
    return ((it + 1) * num_programs + sk_iters - 1) // sk_iters - 1


@triton.jit
def _gemm_sk_kernel(A, B, Bias, C, W, Flags, token, M, N, K, num_programs, sk_tiles,
                    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                    EVEN_K: tl.constexpr, TMA: tl.constexpr, TRANS_B: tl.constexpr, HAS_BIAS: tl.constexpr,
                    ACT: tl.constexpr, INTERPRETER: tl.constexpr):
    """Stream-K: the first `sk_tiles` tiles' k-steps, laid end to end, are cut into one equal range per program;
    the remaining tiles are then dealt one at a time, as in the persistent grid.

    A program walks its range from the end backwards, one tile's piece at a time. The program holding a tile's last
    k-step finishes it: it waits for the flags of the lower programs holding the rest of that tile (their piece is
    the end of their range, so the first thing they computed), adds their fp32 partial tiles to its own (always
    in the same order, so c is bitwise deterministic) and stores c. Any other piece is stored as the program's one
    partial tile (W, one slot a program), then its flag is set to this call's `token` with release semantics.
    Flags hold the token, not a count, so a workspace filled with anything but this token needs no clearing. All
    programs are resident at once (one per SM at most), and a program only ever waits for lower programs' first
    pieces, which wait for nothing: no deadlock, and in the interpreter (programs run in order) no wait at all.
    """
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    sk_iters = sk_tiles * k_tiles
    first = pid * sk_iters // num_programs
    end = (pid + 1) * sk_iters // num_programs
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    while end > first:
        tile = (end - 1) // k_tiles
        tile_lo = tile * k_tiles
        start = tl.maximum(first, tile_lo)
        pid_m, pid_n = _tile_of(tile, num_m, num_n, GROUP_M)
        acc = _accumulate(A, B, pid_m * BLOCK_M, pid_n * BLOCK_N, (start - tile_lo) * BLOCK_K,
                          (end - tile_lo) * BLOCK_K, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                          BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, TMA, TRANS_B, INTERPRETER)
        if end == tile_lo + k_tiles:
            # this program holds the tile's last k-step: add the lower programs' pieces, nearest first
            q_lo = _owner(tile_lo, num_programs, sk_iters)
            for i in range(0, pid - q_lo):
                q = pid - 1 - i
                seen = tl.atomic_cas(Flags + q, token, token, sem="acquire", scope="gpu")
                while seen != token:
                    seen = tl.atomic_cas(Flags + q, token, token, sem="acquire", scope="gpu")
                acc += tl.load(W + q * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
            acc = _epilogue(acc, Bias, pid_n * BLOCK_N + tl.arange(0, BLOCK_N), N, HAS_BIAS, ACT)
            _store_tile(acc, C, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N,
                        TMA, INTERPRETER)
        else:
            # a piece without the tile's last k-step (only ever the end of this program's range): publish it
            tl.store(W + pid * (BLOCK_M * BLOCK_N) + offs, acc)
            tl.debug_barrier()
            tl.atomic_xchg(Flags + pid, token, sem="release", scope="gpu")
        end = start
    for tile in range(sk_tiles + pid, num_m * num_n, num_programs):
        pid_m, pid_n = _tile_of(tile, num_m, num_n, GROUP_M)
        acc = _accumulate(A, B, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_tiles * BLOCK_K, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, TMA,
                          TRANS_B, INTERPRETER)
        acc = _epilogue(acc, Bias, pid_n * BLOCK_N + tl.arange(0, BLOCK_N), N, HAS_BIAS, ACT)
        _store_tile(acc, C, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, TMA,
                    INTERPRETER)


@triton.jit
def _ws_tile(tile, epi_tile, a_desc, b_desc, c_desc, Bias, N, k_steps, num_m, num_n,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
             TRANS_B: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, INTERPRETER: tl.constexpr):
    """One output tile of the warp-specialized persistent kernel: the k-loop, then the epilogue of `epi_tile`."""
    pid_m, pid_n = _tile_of(tile, num_m, num_n, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ks in range(k_steps):
        a = a_desc.load([pid_m * BLOCK_M, ks * BLOCK_K])
        if TRANS_B:
            b = b_desc.load([pid_n * BLOCK_N, ks * BLOCK_K]).T
        else:
            b = b_desc.load([ks * BLOCK_K, pid_n * BLOCK_N])
        acc = _mma(a, b, acc, INTERPRETER)
    pid_m, pid_n = _tile_of(epi_tile, num_m, num_n, GROUP_M)
    acc = _epilogue(acc, Bias, pid_n * BLOCK_N + tl.arange(0, BLOCK_N), N, HAS_BIAS, ACT)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], _to_out(acc, c_desc.dtype, INTERPRETER))


@triton.jit
def _gemm_ws_kernel(A, B, Bias, C, M, N, K, num_programs, stride_am, stride_b, stride_cm,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                    TRANS_B: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, WS: tl.constexpr,
                    INTERPRETER: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    # out-of-bounds rows, columns and k are zero-filled by the copy engine (and clipped on store): no masks
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    if TRANS_B:
        b_desc = tl.make_tensor_descriptor(B, shape=[N, K], strides=[stride_b, 1], block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(B, shape=[K, N], strides=[stride_b, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])
    epi_tile = pid - num_programs
    # `warp_specialize` is only spelled out when asked for, so a Triton without it fails those configs alone.
    if WS:
        for tile in tl.range(pid, num_m * num_n, num_programs, warp_specialize=True):
            epi_tile += num_programs
            _ws_tile(tile, epi_tile, a_desc, b_desc, c_desc, Bias, N, k_steps, num_m, num_n,
                     BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, TRANS_B, HAS_BIAS, ACT, INTERPRETER)
    else:
        for tile in range(pid, num_m * num_n, num_programs):
            epi_tile += num_programs
            _ws_tile(tile, epi_tile, a_desc, b_desc, c_desc, Bias, N, k_steps, num_m, num_n,
                     BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, TRANS_B, HAS_BIAS, ACT, INTERPRETER)


@triton.jit
def _sum_partials_kernel(W, C, M, N, stride_cm, stride_cn, SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, INTERPRETER: tl.constexpr):
    """c = the sum of the SPLIT_K fp32 partial planes of W ([SPLIT_K, M, N]), in split order, rounded once."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    w_ptrs = W + offs_m[:, None] * N + offs_n[None, :]
    acc = tl.load(w_ptrs, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(w_ptrs + s * M * N, mask=mask, other=0.0)
    out = _to_out(acc, C.dtype.element_ty, INTERPRETER)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, out, mask=mask)


@triton.jit
def _zero_kernel(C, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    zeros = tl.zeros((BLOCK_M, BLOCK_N), dtype=C.dtype.element_ty)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, zeros,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _program_count(t, work):
    """Programs of a persistent launch: one per SM (at most one per unit of work)."""
    if t.is_cuda:
        sms = torch.cuda.get_device_properties(t.device).multi_processor_count
    else:
        sms = 4  # the interpreter: few programs, so each one loops over several tiles
    return max(1, min(work, sms))


def stream_k_plan(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, sms, slots):
    """(programs, sk_tiles) of a stream-K launch: one program per SM (at most `slots`, the workspace's partial
    tiles, and at most one per k-step of the stream-K tiles); the stream-K tiles are all of them when there are
    fewer tiles than programs, else the last partial wave plus one full wave (none when the tiles fill whole
    waves), so each program's range spans one to two tiles and the rest are dealt whole."""
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    k_tiles = triton.cdiv(K, BLOCK_K)
    programs = max(1, min(sms, slots, tiles * k_tiles))
    if tiles < programs:
        return programs, tiles
    rest = tiles % programs
    return programs, (rest + programs if rest else 0)


def _launch_stream_k(a, b, bias, c, scratch, *, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages,
                     TMA, TRANS_B, EPILOGUE, PROGRAMS):
    tile = BLOCK_M * BLOCK_N
    if scratch is None or scratch.dtype != torch.float32 or not scratch.is_contiguous() \
            or scratch.numel() < tile + 2:
        raise ValueError(f"SK=1 needs a contiguous fp32 scratch of at least one {BLOCK_M}x{BLOCK_N} partial tile and "
                         f"its flag per program (got {'none' if scratch is None else f'{scratch.numel()} {scratch.dtype}'})")
    slots = scratch.numel() // (tile + 2)
    if PROGRAMS is None:
        PROGRAMS = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4
    programs, sk_tiles = stream_k_plan(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, PROGRAMS, slots)
    if (programs + 1) * sk_tiles * triton.cdiv(K, BLOCK_K) >= 2 ** 31:
        raise ValueError("the stream-K k-step ranges are indexed in 32 bits: K too long for SK=1")
    work = scratch[:programs * tile]
    flags = scratch[slots * tile:slots * tile + 2 * programs].view(torch.int64)
    # this call's flag value, drawn from the OS's entropy by a generator of its own (torch's global one is left
    # alone): odd and above 2^40, so the poison pattern (0x7FC0DEAD7FC0DEAD, even) never reads as set, and a flag
    # an earlier call left equals it only with odds of 2^-59
    token = (torch.Generator().seed() % 2 ** 60 | 1) + 2 ** 40
    stride_bk, stride_bn = (b.stride(1), b.stride(0)) if TRANS_B else (b.stride(0), b.stride(1))
    if TMA:
        a_arg = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K])
        b_arg = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K] if TRANS_B else [BLOCK_K, BLOCK_N])
        c_arg = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N // (2 if TMA == 2 else 1)])
    else:
        a_arg, b_arg, c_arg = a, b, c
    _gemm_sk_kernel[(programs,)](
        a_arg, b_arg, c if bias is None else bias, c_arg, work, flags, token, M, N, K, programs, sk_tiles,
        a.stride(0), a.stride(1), stride_bk, stride_bn, c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, EVEN_K=K % BLOCK_K == 0, TMA=TMA,
        TRANS_B=TRANS_B, HAS_BIAS=bias is not None, ACT=_ACTIVATIONS[EPILOGUE], INTERPRETER=not a.is_cuda,
        num_warps=num_warps, num_stages=num_stages)


def launch(a, b, x, y=None, *, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages,
           PERSISTENT=0, TMA=0, SPLIT_K=1, EPILOGUE="none", TRANS_B=0, WS=None, FLATTEN=0, SK=0, PROGRAMS=None,
           scratch=None):
    """c = act(a @ b [+ bias]) (b.T when TRANS_B): called as launch(a, b, c) or launch(a, b, bias, c).
    `scratch` (fp32, at least SPLIT_K * M * N elements) holds split-K's partial tiles for a 16-bit c; with SK=1
    (stream-K), one partial tile and one 64-bit flag per program. PROGRAMS (tests) overrides the SM count."""
    bias, c = (None, x) if y is None else (x, y)
    if (bias is None) != (EPILOGUE == "none"):
        raise ValueError(f"EPILOGUE={EPILOGUE!r} does not match the {'absence' if bias is None else 'presence'} "
                         "of a bias tensor")
    M, K = a.shape
    N = b.shape[0] if TRANS_B else b.shape[1]
    if SK:
        _launch_stream_k(a, b, bias, c, scratch, M=M, N=N, K=K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                         GROUP_M=GROUP_M, num_warps=num_warps, num_stages=num_stages, TMA=TMA, TRANS_B=TRANS_B,
                         EPILOGUE=EPILOGUE, PROGRAMS=PROGRAMS)
        return
    if WS is not None:  # the persistent_ws template (WS=0: the same kernel without warp specialization)
        if a.stride(1) != 1 or b.stride(1) != 1 or c.stride(1) != 1:
            raise ValueError("WS needs row-major a, b and c (device-side tensor descriptors)")
        programs = _program_count(a, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N))
        _gemm_ws_kernel[(programs,)](
            a, b, c if bias is None else bias, c, M, N, K, programs, a.stride(0), b.stride(0), c.stride(0),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, TRANS_B=TRANS_B,
            HAS_BIAS=bias is not None, ACT=_ACTIVATIONS[EPILOGUE], WS=WS, INTERPRETER=not a.is_cuda,
            num_warps=num_warps, num_stages=num_stages)
        return
    partials = SPLIT_K > 1 and c.element_size() != 4
    if SPLIT_K > 1 and EPILOGUE != "none":
        raise ValueError("SPLIT_K > 1 has no epilogue")
    if partials and SPLIT_K * M * N >= 2 ** 31:
        raise ValueError(f"SPLIT_K * M * N = {SPLIT_K * M * N}: the partial planes are indexed in 32 bits")
    if partials and (scratch is None or scratch.dtype != torch.float32 or scratch.numel() < SPLIT_K * M * N
                     or not scratch.is_contiguous()):
        raise ValueError(f"SPLIT_K={SPLIT_K} with a 16-bit output needs a contiguous fp32 scratch of at least "
                         f"SPLIT_K * M * N = "
                         f"{SPLIT_K * M * N} elements (got "
                         f"{'none' if scratch is None else f'{scratch.numel()} {scratch.dtype}'})")
    stride_bk, stride_bn = (b.stride(1), b.stride(0)) if TRANS_B else (b.stride(0), b.stride(1))
    k_span = triton.cdiv(triton.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K
    even_k = K % (BLOCK_K * SPLIT_K) == 0
    work = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N) * SPLIT_K
    programs = _program_count(a, work) if PERSISTENT else work
    if TMA:
        a_arg = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K])
        b_arg = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K] if TRANS_B else [BLOCK_K, BLOCK_N])
        c_arg = c if SPLIT_K > 1 else TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N // (2 if TMA == 2 else 1)])
    else:
        a_arg, b_arg, c_arg = a, b, c
    if partials:
        c_arg = scratch
    elif SPLIT_K > 1:
        _zero_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 128))](c, M, N, c.stride(0), c.stride(1),
                                                                 BLOCK_M=32, BLOCK_N=128, num_warps=4)
    _gemm_kernel[(programs,)](
        a_arg, b_arg, c if bias is None else bias, c_arg, M, N, K, k_span, programs,
        a.stride(0), a.stride(1), stride_bk, stride_bn, c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, SPLIT_K=SPLIT_K, EVEN_K=even_k,
        PERSISTENT=PERSISTENT, TMA=TMA, TRANS_B=TRANS_B, HAS_BIAS=bias is not None, ACT=_ACTIVATIONS[EPILOGUE],
        PARTIALS=partials, FLATTEN=FLATTEN, INTERPRETER=not a.is_cuda,
        num_warps=num_warps, num_stages=num_stages)
    if partials:
        _sum_partials_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 128))](
            scratch, c, M, N, c.stride(0), c.stride(1), SPLIT_K=SPLIT_K, BLOCK_M=32, BLOCK_N=128,
            INTERPRETER=not a.is_cuda, num_warps=4)

"""A GEMM with the pattern's epilogue fused: C = epilogue(A @ B0 [+ bias], A @ B1, extras), fp32 accumulation,
one rounding at the store. `_epilogue` below is written from the pattern's own steps (kernelloop.deliver.fuse.codegen).

- DUAL=1 (SwiGLU's gate and up projections): two weights, A read once per k-step for both; two fp32 accumulator
  tiles of BLOCK_M x BLOCK_N, their product (e.g. silu(acc0) * acc1) stored as one tile. The intermediates the
  model writes and reads back (gate, up, silu(gate)) never leave registers.
- DUAL=0: one GEMM (linear / addmm / mm), its bias, then the elementwise chain (GPT-2's tanh GELU); up to two more
  tensors enter the epilogue: EK0/EK1 = 1 for a [N] row, 2 for a [M, N] tile.
- TRANS_B=1: the weights are [N, K] (nn.Linear's layout), else [K, N].

Scheduling as the project's GEMM template (ops/gemm/kernel.py, whose `_tile_of` and `_mma` are written in where it
says GEMM_HELPERS): one output tile per program, or a persistent grid of one program per SM (PERSISTENT=1); tiles
visited in GROUP_M-row groups for L2 reuse; TMA=1 loads A/B tiles and stores C through host-built tensor
descriptors (sm_90).

launch(a, b0, [b1], [bias], [e0], [e1], c, *, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages,
       PERSISTENT, TMA, DUAL, TRANS_B, HAS_BIAS, EK0=0, EK1=0)
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# {COMMON}

# {GEMM_HELPERS}

# {EPILOGUE}


@triton.jit
def _extra(E, offs_m, offs_n, M, N, KIND: tl.constexpr):
    """An epilogue operand: a [N] row broadcast over the tile (1), a [M, N] tile (2), or nothing (0)."""
    if KIND == 1:
        return tl.load(E + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    elif KIND == 2:
        ptrs = E + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        return tl.load(ptrs, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N), other=0.0).to(tl.float32)
    else:
        return 0.0


@triton.jit
def _one_tile(tile, A, B0, B1, Bias, E0, E1, C, M, N, K, num_m, num_n,
              stride_am, stride_bk, stride_bn, stride_cm,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
              EVEN_K: tl.constexpr, TMA: tl.constexpr, TRANS_B: tl.constexpr, DUAL: tl.constexpr,
              HAS_BIAS: tl.constexpr, EK0: tl.constexpr, EK1: tl.constexpr, INTERPRETER: tl.constexpr):
    pid_m, pid_n = _tile_of(tile, num_m, num_n, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc0 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA:
        # out-of-bounds rows, columns and k are zero-filled by the copy engine: no masks
        for k in range(0, K, BLOCK_K):
            a = A.load([off_m, k])
            if TRANS_B:
                b0 = B0.load([off_n, k]).T
            else:
                b0 = B0.load([k, off_n])
            acc0 = _mma(a, b0, acc0, INTERPRETER)
            if DUAL:
                if TRANS_B:
                    b1 = B1.load([off_n, k]).T
                else:
                    b1 = B1.load([k, off_n])
                acc1 = _mma(a, b1, acc1, INTERPRETER)
    else:
        # rows past M / columns past N wrap onto valid ones (never stored), so only k needs a mask
        rm = (off_m + tl.arange(0, BLOCK_M)) % M
        rn = (off_n + tl.arange(0, BLOCK_N)) % N
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = A + rm.to(tl.int64)[:, None] * stride_am + rk[None, :]
        b_off = rk[:, None] * stride_bk + rn.to(tl.int64)[None, :] * stride_bn
        for k in range(0, K, BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b0 = tl.load(B0 + b_off)
            else:
                kk = k + rk
                a = tl.load(a_ptrs, mask=kk[None, :] < K, other=0.0)
                b0 = tl.load(B0 + b_off, mask=kk[:, None] < K, other=0.0)
            acc0 = _mma(a, b0, acc0, INTERPRETER)
            if DUAL:
                if EVEN_K:
                    b1 = tl.load(B1 + b_off)
                else:
                    b1 = tl.load(B1 + b_off, mask=(k + rk)[:, None] < K, other=0.0)
                acc1 = _mma(a, b1, acc1, INTERPRETER)
            a_ptrs += BLOCK_K
            b_off += BLOCK_K * stride_bk
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        acc0 += tl.load(Bias + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    e0 = _extra(E0, offs_m, offs_n, M, N, EK0)
    e1 = _extra(E1, offs_m, offs_n, M, N, EK1)
    out = _epilogue(acc0, acc1, e0, e1)
    if TMA:
        C.store([off_m, off_n], _round(out, C.dtype, INTERPRETER))
    else:
        c_ptrs = C + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
        tl.store(c_ptrs, _round(out, C.dtype.element_ty, INTERPRETER),
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _fused_gemm(A, B0, B1, Bias, E0, E1, C, M, N, K, num_programs, stride_am, stride_bk, stride_bn, stride_cm,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                EVEN_K: tl.constexpr, PERSISTENT: tl.constexpr, TMA: tl.constexpr, TRANS_B: tl.constexpr,
                DUAL: tl.constexpr, HAS_BIAS: tl.constexpr, EK0: tl.constexpr, EK1: tl.constexpr,
                INTERPRETER: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    if PERSISTENT:
        for tile in range(pid, num_m * num_n, num_programs):
            _one_tile(tile, A, B0, B1, Bias, E0, E1, C, M, N, K, num_m, num_n, stride_am, stride_bk, stride_bn,
                      stride_cm, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, TMA, TRANS_B, DUAL, HAS_BIAS, EK0, EK1,
                      INTERPRETER)
    else:
        _one_tile(pid, A, B0, B1, Bias, E0, E1, C, M, N, K, num_m, num_n, stride_am, stride_bk, stride_bn,
                  stride_cm, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, TMA, TRANS_B, DUAL, HAS_BIAS, EK0, EK1,
                  INTERPRETER)


def launch(*tensors, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, PERSISTENT, TMA, DUAL, TRANS_B,
           HAS_BIAS, EK0=0, EK1=0):
    rest = list(tensors)
    a, b0 = rest.pop(0), rest.pop(0)
    b1 = rest.pop(0) if DUAL else None
    bias = rest.pop(0) if HAS_BIAS else None
    e0 = rest.pop(0) if EK0 else None
    e1 = rest.pop(0) if EK1 else None
    (c,) = rest
    M, K = a.shape
    N = b0.shape[0] if TRANS_B else b0.shape[1]
    stride_bk, stride_bn = (b0.stride(1), b0.stride(0)) if TRANS_B else (b0.stride(0), b0.stride(1))
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    if PERSISTENT:
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4
        programs = max(1, min(tiles, sms))
    else:
        programs = tiles
    if TMA:
        b_block = [BLOCK_N, BLOCK_K] if TRANS_B else [BLOCK_K, BLOCK_N]
        a_arg = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K])
        b0_arg = TensorDescriptor.from_tensor(b0, b_block)
        b1_arg = TensorDescriptor.from_tensor(b1, b_block) if b1 is not None else b0_arg
        c_arg = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N])
    else:
        a_arg, b0_arg, c_arg = a, b0, c
        b1_arg = b1 if b1 is not None else b0
    _fused_gemm[(programs,)](
        a_arg, b0_arg, b1_arg, c if bias is None else bias, c if e0 is None else e0, c if e1 is None else e1, c_arg,
        M, N, K, programs, a.stride(0), stride_bk, stride_bn, c.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, EVEN_K=K % BLOCK_K == 0,
        PERSISTENT=PERSISTENT, TMA=TMA, TRANS_B=TRANS_B, DUAL=DUAL, HAS_BIAS=bool(HAS_BIAS), EK0=EK0, EK1=EK1,
        INTERPRETER=not a.is_cuda, num_warps=num_warps, num_stages=num_stages)

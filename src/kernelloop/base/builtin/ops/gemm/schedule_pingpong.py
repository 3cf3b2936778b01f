"""GEMM c = act(a @ b [+ bias]) (b.T when TRANS_B) generated from the schedule `gluon_pingpong` by
kernelloop.tune.schedule.lower:
a persistent grid; a loader of 1 warp(s) fills a ring of 5 slots; 2 math roles of 4 warps alternating whole tiles, one whole-tile accumulator; c stored by TMA through shared memory (tile 128x128x64 and epilogue 'none' as generated; the config sets them).
Do not edit: change the schedule and lower it again (`kernelloop schedule lower`).
"""

import torch
import triton

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)

SCHEDULE = '{"barriers":[{"count":1,"name":"turn","size":2}],"epilogue":{"fused":[],"store":"tma"},"family":"gemm","issue":{"accumulators":1,"tiles":"alternate"},"name":"gluon_pingpong","ring":{"empty_count":1,"ready_count":1,"stages":5},"roles":[{"k_step":[{"barrier":"ready","index":null,"op":"wait","parity":"phase"},{"op":"mma"},{"op":"mma_wait","pending":1},{"op":"sync"},{"barrier":"empty","count":1,"index":null,"op":"arrive","skip_first":true,"slot":"previous"}],"kind":"math","name":"math0","registers":232,"tile_begin":[{"barrier":"turn","index":0,"op":"wait","parity":"phase^1"}],"tile_end":[{"op":"sync"},{"barrier":"turn","count":1,"index":1,"op":"arrive","skip_first":false,"slot":"current"},{"op":"mma_wait","pending":0},{"op":"sync"},{"barrier":"empty","count":1,"index":null,"op":"arrive","skip_first":false,"slot":"previous"}],"warps":4},{"k_step":[{"barrier":"ready","index":null,"op":"wait","parity":"phase"},{"op":"mma"},{"op":"mma_wait","pending":1},{"op":"sync"},{"barrier":"empty","count":1,"index":null,"op":"arrive","skip_first":true,"slot":"previous"}],"kind":"math","name":"math1","registers":232,"tile_begin":[{"barrier":"turn","index":1,"op":"wait","parity":"phase"}],"tile_end":[{"op":"sync"},{"barrier":"turn","count":1,"index":0,"op":"arrive","skip_first":false,"slot":"current"},{"op":"mma_wait","pending":0},{"op":"sync"},{"barrier":"empty","count":1,"index":null,"op":"arrive","skip_first":false,"slot":"previous"}],"warps":4},{"k_step":[{"barrier":"empty","index":null,"op":"wait","parity":"phase^1"},{"barrier":"ready","op":"load"}],"kind":"loader","name":"loader","registers":40,"tile_begin":[],"tile_end":[],"warps":1}],"tile":{"block_k":64,"block_m":128,"block_n":128,"group_m":8}}'

_TORCH_TO_GL = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
_sync_warps = getattr(gl, "thread_barrier", None) or getattr(gl, "barrier", None)
_tma_load = getattr(tma, "async_load", None) or getattr(tma, "async_copy_global_to_shared", None)
_tma_store = getattr(tma, "async_store", None) or getattr(tma, "async_copy_shared_to_global", None)
# EPILOGUE (the schedule's epilogue.fused, joined by '_') -> (HAS_BIAS, ACT)
_EPILOGUES = {
    "none": (False, 0),
    "bias": (True, 0),
    "gelu": (False, 1),
    "silu": (False, 2),
    "relu": (False, 3),
    "bias_gelu": (True, 1),
    "bias_silu": (True, 2),
    "bias_relu": (True, 3),
}


@gluon.constexpr_function
def _mma_layout(BLOCK_M, BLOCK_N, num_warps):
    """The warpgroup-MMA accumulator layout: warps stacked along M (16 rows each), the widest instruction N."""
    warps = [4, 1]
    while warps[0] * warps[1] != num_warps:
        if BLOCK_M > 16 * warps[0]:
            warps[0] *= 2
        else:
            warps[1] *= 2
    n = 256
    while n > max(BLOCK_N // warps[1], 8) or BLOCK_N % n != 0:
        n -= 8
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=warps, instr_shape=[16, n, 16])

@gluon.jit
def _tile_coords(tile, num_m, num_n, GROUP_M: gl.constexpr):
    """(pid_m, pid_n) of a linear tile index, GROUP_M tile-rows at a time (as the tiled template's order)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n

@gluon.jit
def _fused(acc, Bias, col, N, WIDTH: gl.constexpr, layout: gl.constexpr, HAS_BIAS: gl.constexpr,
           ACT: gl.constexpr):
    """The fused epilogue on an fp32 accumulator: + bias[col:col + WIDTH] (loaded in the accumulator's column
    layout, broadcast over rows), then the activation (ACT: 1 exact erf GELU, 2 SiLU, 3 ReLU)."""
    if HAS_BIAS:
        offs_n = col + gl.arange(0, WIDTH, layout=gl.SliceLayout(0, layout))
        bias = gl.load(Bias + offs_n, mask=offs_n < N, other=0.0).to(gl.float32)
        acc = acc + gl.expand_dims(bias, 0)
    if ACT == 1:
        acc = 0.5 * acc * (1.0 + gl.erf(acc * 0.7071067811865476))
    elif ACT == 2:
        acc = acc / (1.0 + gl.exp(-acc))
    elif ACT == 3:
        acc = gl.maximum(acc, 0.0)
    return acc

@gluon.jit
def _ring(a_desc, b_desc, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
          STAGES: gl.constexpr, TRANS_B: gl.constexpr):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    if TRANS_B:
        b_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    else:
        b_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    return a_bufs, b_bufs, ready, empty

@gluon.jit
def _math0(a_bufs, b_bufs, ready, empty, turn, c_desc, c_bufs, M, N, K, Bias, BLOCK_M: gl.constexpr,
           BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
           TRANS_B: gl.constexpr, HAS_BIAS: gl.constexpr, ACT: gl.constexpr, num_warps: gl.constexpr):
    WIDTH: gl.constexpr = BLOCK_N // 1
    layout: gl.constexpr = _mma_layout(BLOCK_M, WIDTH, num_warps)
    c_smem = c_bufs.index(0)
    num_m = gl.cdiv(M, BLOCK_M)
    num_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    programs = gl.num_programs(0)
    it = 0 * k_steps
    j = 0
    for tile in range(gl.program_id(0) + 0 * programs, num_m * num_n, 2 * programs):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        mbarrier.wait(turn.index(0), (j & 1) ^ 1)
        acc = gl.zeros((BLOCK_M, WIDTH), dtype=gl.float32, layout=layout)
        for ks in range(k_steps):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            if TRANS_B:
                b = b_bufs.index(s).permute((1, 0))
            else:
                b = b_bufs.index(s)
            acc = warpgroup_mma(a_bufs.index(s), b, acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc,))
            _sync_warps()
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ks > 0)
            it += 1
        _sync_warps()
        mbarrier.arrive(turn.index(1), count=1)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        _sync_warps()
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
        it += 1 * k_steps
        j += 1
        acc = _fused(acc, Bias, pid_n * BLOCK_N, N, WIDTH, layout, HAS_BIAS, ACT)
        tma.store_wait(pendings=0)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(pendings=0)

@gluon.jit
def _math1(a_bufs, b_bufs, ready, empty, turn, c_desc, c_bufs, M, N, K, Bias, BLOCK_M: gl.constexpr,
           BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
           TRANS_B: gl.constexpr, HAS_BIAS: gl.constexpr, ACT: gl.constexpr, num_warps: gl.constexpr):
    WIDTH: gl.constexpr = BLOCK_N // 1
    layout: gl.constexpr = _mma_layout(BLOCK_M, WIDTH, num_warps)
    c_smem = c_bufs.index(1)
    num_m = gl.cdiv(M, BLOCK_M)
    num_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    programs = gl.num_programs(0)
    it = 1 * k_steps
    j = 0
    for tile in range(gl.program_id(0) + 1 * programs, num_m * num_n, 2 * programs):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        mbarrier.wait(turn.index(1), j & 1)
        acc = gl.zeros((BLOCK_M, WIDTH), dtype=gl.float32, layout=layout)
        for ks in range(k_steps):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            if TRANS_B:
                b = b_bufs.index(s).permute((1, 0))
            else:
                b = b_bufs.index(s)
            acc = warpgroup_mma(a_bufs.index(s), b, acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc,))
            _sync_warps()
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ks > 0)
            it += 1
        _sync_warps()
        mbarrier.arrive(turn.index(0), count=1)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        _sync_warps()
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
        it += 1 * k_steps
        j += 1
        acc = _fused(acc, Bias, pid_n * BLOCK_N, N, WIDTH, layout, HAS_BIAS, ACT)
        tma.store_wait(pendings=0)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(pendings=0)

@gluon.jit
def _loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
            BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr, TRANS_B: gl.constexpr,
            TILE_BYTES: gl.constexpr):
    num_m = gl.cdiv(M, BLOCK_M)
    num_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    it = 0
    for tile in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        for ks in range(k_steps):
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, TILE_BYTES)
            _tma_load(a_desc, [pid_m * BLOCK_M, ks * BLOCK_K], bar, a_bufs.index(s))
            if TRANS_B:
                _tma_load(b_desc, [pid_n * BLOCK_N, ks * BLOCK_K], bar, b_bufs.index(s))
            else:
                _tma_load(b_desc, [ks * BLOCK_K, pid_n * BLOCK_N], bar, b_bufs.index(s))
            it += 1


@gluon.jit
def _gemm_gluon_pingpong_kernel(a_desc, b_desc, c_desc, M, N, K, Bias,
                                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
                                STAGES: gl.constexpr, TRANS_B: gl.constexpr, HAS_BIAS: gl.constexpr, ACT: gl.constexpr,
                                num_warps: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    a_bufs, b_bufs, ready, empty = _ring(a_desc, b_desc, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, TRANS_B)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_M, BLOCK_N // 1], c_desc.layout)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    TILE_BYTES: gl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * (dtype.primitive_bitwidth // 8)
    gl.warp_specialize([
        (_math0, (a_bufs, b_bufs, ready, empty, turn, c_desc, c_bufs, M, N, K, Bias, BLOCK_M, BLOCK_N, BLOCK_K,
                  GROUP_M, STAGES, TRANS_B, HAS_BIAS, ACT, num_warps)),
        (_math1, (a_bufs, b_bufs, ready, empty, turn, c_desc, c_bufs, M, N, K, Bias, BLOCK_M, BLOCK_N, BLOCK_K,
                  GROUP_M, STAGES, TRANS_B, HAS_BIAS, ACT, num_warps)),
        (_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                   STAGES, TRANS_B, TILE_BYTES)),
    ], [num_warps, 1], [232, 40])


def launch(a, b, x, y=None, *, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages,
           EPILOGUE="none", TRANS_B=0, scratch=None):
    """c = act(a @ b [+ bias]) (b.T when TRANS_B), called as launch(a, b, c) or launch(a, b, bias, c); c in a's
    dtype (fp16 or bf16); num_warps counts every math warp; EPILOGUE names the fused operations."""
    if EPILOGUE not in _EPILOGUES:
        raise ValueError(f"EPILOGUE={EPILOGUE!r}: the schedule gluon_pingpong lowers {sorted(_EPILOGUES)}")
    has_bias, act = _EPILOGUES[EPILOGUE]
    bias, c = (None, x) if y is None else (x, y)
    if (bias is None) == has_bias:
        raise ValueError(f"EPILOGUE={EPILOGUE!r} does not match the {'absence' if bias is None else 'presence'} "
                         "of a bias tensor")
    if num_warps % 2 != 0:
        raise ValueError(f"num_warps={num_warps}: 2 math role(s) of equal warps")
    if not a.is_cuda:
        raise RuntimeError("the schedule gluon_pingpong runs on sm_90 GPUs only (Gluon has no interpreter)")
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype or c.dtype != a.dtype:
        raise ValueError(f"gluon_pingpong needs fp16/bf16 a, b and c of one dtype (got {a.dtype}, {b.dtype}, {c.dtype})")
    if a.stride(1) != 1 or b.stride(1) != 1 or c.stride(1) != 1:
        raise ValueError("gluon_pingpong needs row-major a, b and c (TMA descriptors)")
    M, K = a.shape
    N = b.shape[0] if TRANS_B else b.shape[1]
    if bias is not None and (bias.shape != (N,) or bias.dtype != a.dtype or bias.stride(0) != 1):
        raise ValueError(f"gluon_pingpong needs a contiguous bias [{N}] in {a.dtype} (got {list(bias.shape)}, "
                         f"{bias.dtype})")
    dt = _TORCH_TO_GL[a.dtype]
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], dt))
    b_block = [BLOCK_N, BLOCK_K] if TRANS_B else [BLOCK_K, BLOCK_N]
    b_desc = TensorDescriptor.from_tensor(b, b_block, gl.NVMMASharedLayout.get_default_for(b_block, dt))
    c_block = [BLOCK_M, BLOCK_N // 1]
    c_desc = TensorDescriptor.from_tensor(c, c_block, gl.NVMMASharedLayout.get_default_for(c_block, dt))
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    programs = max(1, min(tiles, torch.cuda.get_device_properties(a.device).multi_processor_count))
    warps = num_warps // 2
    # the register file over every warp of the program (workers padded to whole warpgroups), rounded down to 8
    total_warps = warps + -(-(1 * warps + 1) // 4) * 4
    maxnreg = min(255, 65536 // (total_warps * 32)) // 8 * 8
    _gemm_gluon_pingpong_kernel[(programs,)](
        a_desc, b_desc, c_desc, M, N, K, c if bias is None else bias,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, STAGES=num_stages, TRANS_B=TRANS_B,
        HAS_BIAS=has_bias, ACT=act, num_warps=warps, maxnreg=maxnreg)

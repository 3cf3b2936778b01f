"""GEMM c = a @ b (b.T when TRANS_B) as a warp-specialized Hopper kernel written in Gluon, Triton's tile-level
language with explicit layouts, shared memory, barriers and partitions (sm_90 only; no interpreter).

Each program of a persistent grid (one per SM) walks the output tiles in GROUP_M-row super-groups, as the
"tiled" template does, with two partitions of warps:
- the loader: one warp that issues the TMA copies of the a and b tiles into a ring of `num_stages` shared-memory
  slots; a slot's "ready" barrier completes when its bytes have landed, and the loader waits on the slot's
  "empty" barrier before it overwrites it;
- the math partition: `num_warps` warps (one or two warpgroups) that wait for each slot, issue Hopper's
  asynchronous warpgroup MMA on it, keep one MMA in flight (`warpgroup_mma_wait(1)`), then release the slot of the
  MMA that has just completed; after a tile's k-loop they round the fp32 accumulator to c's dtype and store it,
  through shared memory and a TMA store (EPI_TMA=1; the store's completion is awaited only before the next
  tile's epilogue reuses the buffer) or straight from registers (EPI_TMA=0, which leaves the shared memory of the
  staging tile to the ring).

Releasing a slot is one thread's mbarrier arrive, so all math warps must be past their wait first: SYNC=1 (the
default) puts a barrier over the math warps there. Triton 3.6 and 3.9 already emit one before the arrive (seen in the
PTX of both), so SYNC=0 is kept only to measure that.

So the loads of the next tile run during this tile's last MMAs and its epilogue, which is what the persistent
"tiled" kernels could not do (their software pipeline restarts at each tile). Register budget: the kernel is
built with `maxnreg` = 65536 / all threads, and the loader gives its registers back (`worker_num_regs`) so the
math warps can hold the accumulator (128 fp32 values a thread for 128x256 on 8 warps).

Out-of-bounds rows, columns and k of a tile are zero-filled by the copy engine and clipped on the TMA store (the
register store masks them), so any M, N, K with 16-byte aligned rows works.
"""

import torch
import triton

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)

_TORCH_TO_GL = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
# a barrier over the warps of the calling partition: `thread_barrier` in Triton 3.6, `barrier` in 3.9
_sync_warps = getattr(gl, "thread_barrier", None) or getattr(gl, "barrier", None)
# TMA copies: `async_copy_global_to_shared` / `async_copy_shared_to_global` in 3.6, `async_load` / `async_store`
# in 3.9 (same positional arguments)
_tma_load = getattr(tma, "async_load", None) or getattr(tma, "async_copy_global_to_shared", None)
_tma_store = getattr(tma, "async_store", None) or getattr(tma, "async_copy_shared_to_global", None)


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
def _loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K,
            BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
            STAGES: gl.constexpr, TRANS_B: gl.constexpr, TILE_BYTES: gl.constexpr):
    num_m = gl.cdiv(M, BLOCK_M)
    num_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    it = 0
    for tile in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        for ks in range(k_steps):
            s = it % STAGES
            # a fresh barrier counts as having completed the phase before phase 0: the first lap does not wait
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
def _b_slice(b_bufs, s, start: gl.constexpr, width: gl.constexpr, TRANS_B: gl.constexpr):
    """Columns [start, start + width) of slot s's b tile, as the MMA's [BLOCK_K, width] operand."""
    if TRANS_B:
        return b_bufs.index(s).slice(start, width, dim=0).permute((1, 0))
    else:
        return b_bufs.index(s).slice(start, width, dim=1)

@gluon.jit
def _k_loop(a_bufs, b_bufs, ready, empty, acc, it, k_steps, STAGES: gl.constexpr, TRANS_B: gl.constexpr,
            SYNC: gl.constexpr):
    """One tile's k-loop into the whole-tile accumulator `acc`, from ring position `it`: wait for each slot, issue
    the warpgroup MMA on it, keep one MMA in flight, and release the slot of the MMA that has just completed (every
    warp of the partition past its wait, hence the barrier, before one thread arrives). The last slot is still
    held on return: (acc, it) with `it` one past the tile's last position."""
    for ks in range(k_steps):
        s = it % STAGES
        mbarrier.wait(ready.index(s), (it // STAGES) & 1)
        if TRANS_B:
            b = b_bufs.index(s).permute((1, 0))
        else:
            b = b_bufs.index(s)
        acc = warpgroup_mma(a_bufs.index(s), b, acc, is_async=True)
        acc = warpgroup_mma_wait(1, deps=(acc,))
        if SYNC:
            _sync_warps()
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ks > 0)
        it += 1
    return acc, it

@gluon.jit
def _math(a_bufs, b_bufs, ready, empty, c_desc, c_smem, C, stride_cm, M, N, K,
          BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
          STAGES: gl.constexpr, TRANS_B: gl.constexpr, EPI_TMA: gl.constexpr, SYNC: gl.constexpr,
          SUBTILE: gl.constexpr, num_warps: gl.constexpr):
    layout: gl.constexpr = _mma_layout(BLOCK_M, BLOCK_N, num_warps)
    HALF: gl.constexpr = BLOCK_N // 2
    half_layout: gl.constexpr = _mma_layout(BLOCK_M, HALF, num_warps)
    num_m = gl.cdiv(M, BLOCK_M)
    num_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    it = 0
    for tile in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        if SUBTILE == 2:
            # two accumulators, the tile's left and right halves: each k-step issues two MMAs, and the c tile
            # goes out half by half through a staging buffer of half the size
            left = gl.zeros((BLOCK_M, HALF), dtype=gl.float32, layout=half_layout)
            right = gl.zeros((BLOCK_M, HALF), dtype=gl.float32, layout=half_layout)
            for ks in range(k_steps):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                left = warpgroup_mma(a_bufs.index(s), _b_slice(b_bufs, s, 0, HALF, TRANS_B), left, is_async=True)
                right = warpgroup_mma(a_bufs.index(s), _b_slice(b_bufs, s, HALF, HALF, TRANS_B), right,
                                      is_async=True)
                # this k-step's two MMAs at most still in flight: the previous k-step's slot is free
                left, right = warpgroup_mma_wait(2, deps=(left, right))
                if SYNC:
                    _sync_warps()
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ks > 0)
                it += 1
            left, right = warpgroup_mma_wait(0, deps=(left, right))
            if SYNC:
                _sync_warps()
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
            tma.store_wait(pendings=0)  # the previous store has read the staging buffer
            c_smem.store(left.to(c_desc.dtype))
            fence_async_shared()
            _tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
            tma.store_wait(pendings=0)
            c_smem.store(right.to(c_desc.dtype))
            fence_async_shared()
            _tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N + HALF], c_smem)
        else:
            acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
            acc, it = _k_loop(a_bufs, b_bufs, ready, empty, acc, it, k_steps, STAGES, TRANS_B, SYNC)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            if SYNC:
                _sync_warps()
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
            out = acc.to(c_desc.dtype)
            if EPI_TMA:
                tma.store_wait(pendings=0)  # the previous tile's store has read the staging buffer
                c_smem.store(out)
                fence_async_shared()
                _tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
            else:
                offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
                offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
                mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
                gl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], out, mask=mask)
    if EPI_TMA:
        tma.store_wait(pendings=0)

@gluon.jit
def _ring(a_desc, b_desc, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
          STAGES: gl.constexpr, TRANS_B: gl.constexpr):
    """The ring's shared memory: STAGES slots of an a tile and a b tile (b as [BLOCK_N, BLOCK_K] when TRANS_B), and
    each slot's "ready" and "empty" mbarriers, initialized for one arrival."""
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
def _gemm_ws_kernel(a_desc, b_desc, c_desc, C, stride_cm, M, N, K,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                    GROUP_M: gl.constexpr, STAGES: gl.constexpr, TRANS_B: gl.constexpr, EPI_TMA: gl.constexpr,
                    SYNC: gl.constexpr, LOADER_REGS: gl.constexpr, SUBTILE: gl.constexpr, num_warps: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    a_bufs, b_bufs, ready, empty = _ring(a_desc, b_desc, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, TRANS_B)
    if EPI_TMA:
        c_smem = gl.allocate_shared_memory(c_desc.dtype, [BLOCK_M, BLOCK_N // SUBTILE], c_desc.layout)
    else:
        c_smem = a_bufs  # unused
    TILE_BYTES: gl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * (dtype.primitive_bitwidth // 8)
    gl.warp_specialize([
        (_math, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, C, stride_cm, M, N, K, BLOCK_M, BLOCK_N,
                 BLOCK_K, GROUP_M, STAGES, TRANS_B, EPI_TMA, SYNC, SUBTILE, num_warps)),
        (_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                   GROUP_M, STAGES, TRANS_B, TILE_BYTES)),
    ], [1], [LOADER_REGS])


@gluon.jit
def _math_pingpong(a_bufs, b_bufs, ready, empty, turn, c_desc, c_bufs, M, N, K,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
                   STAGES: gl.constexpr, TRANS_B: gl.constexpr, CONSUMER: gl.constexpr, num_warps: gl.constexpr):
    """One of the two math warpgroups of the ping-pong kernel: it takes every other tile of the program (CONSUMER
    0 the even ones), and the two take turns at the tensor cores, so that one's epilogue runs under the other's
    k-loop.

    The ring is shared and filled in the program's tile order, so this consumer's k-step `ks` of its j-th tile is
    ring position (2j + CONSUMER) * k_steps + ks. A consumer starts its k-loop only once the other has issued its
    whole k-loop of the tile before (the `turn` barriers). So when it waits on a slot, the slot's previous lap is
    complete and the next cannot be, and an mbarrier's phase parity never stands for a lap two away."""
    layout: gl.constexpr = _mma_layout(BLOCK_M, BLOCK_N, num_warps)
    c_smem = c_bufs.index(CONSUMER)
    num_m = gl.cdiv(M, BLOCK_M)
    num_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    programs = gl.num_programs(0)
    it = CONSUMER * k_steps
    j = 0
    for tile in range(gl.program_id(0) + CONSUMER * programs, num_m * num_n, 2 * programs):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        # consumer 0's first wait passes on the fresh barrier (it counts the phase before phase 0 as complete)
        if CONSUMER == 0:
            mbarrier.wait(turn.index(0), (j & 1) ^ 1)
        else:
            mbarrier.wait(turn.index(1), j & 1)
        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
        acc, it = _k_loop(a_bufs, b_bufs, ready, empty, acc, it, k_steps, STAGES, TRANS_B, 1)
        # the whole k-loop is issued: the other consumer's turn (its first MMAs queue behind these last ones)
        _sync_warps()
        mbarrier.arrive(turn.index(1 - CONSUMER), count=1)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        _sync_warps()
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
        it += k_steps  # the other consumer's tile, in the ring
        j += 1
        tma.store_wait(pendings=0)  # this consumer's previous store has read its staging buffer
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(pendings=0)

@gluon.jit
def _gemm_pingpong_kernel(a_desc, b_desc, c_desc, M, N, K,
                          BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                          GROUP_M: gl.constexpr, STAGES: gl.constexpr, TRANS_B: gl.constexpr,
                          MATH_REGS: gl.constexpr, LOADER_REGS: gl.constexpr, num_warps: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    a_bufs, b_bufs, ready, empty = _ring(a_desc, b_desc, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, TRANS_B)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_M, BLOCK_N], c_desc.layout)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    TILE_BYTES: gl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * (dtype.primitive_bitwidth // 8)
    gl.warp_specialize([
        (_math_pingpong, (a_bufs, b_bufs, ready, empty, turn, c_desc, c_bufs, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                          GROUP_M, STAGES, TRANS_B, 0, num_warps)),
        (_math_pingpong, (a_bufs, b_bufs, ready, empty, turn, c_desc, c_bufs, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                          GROUP_M, STAGES, TRANS_B, 1, num_warps)),
        (_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                   GROUP_M, STAGES, TRANS_B, TILE_BYTES)),
    ], [num_warps, 1], [MATH_REGS, LOADER_REGS])


LOADER_WARPS = 1
REGISTERS = 65536  # per SM on sm_90


def max_registers(num_warps: int) -> int:
    """The `maxnreg` every thread is built with: the register file over all threads of the program (the math
    warps and the loader's warpgroup: allocation is per 4 warps), rounded down to a multiple of 8."""
    threads = (num_warps + 4) * 32
    return min(255, REGISTERS // threads) // 8 * 8


def pingpong_math_registers(loader_regs: int = 40) -> int:
    """Registers a thread of each ping-pong math warpgroup gets: what the loader's warpgroup gives back of the
    register file (12 warps built at maxnreg 168) shared by the two math warpgroups, rounded down to 8."""
    left = max_registers(8) * 12 * 32 - loader_regs * 4 * 32
    return min(248, left // (2 * 4 * 32) // 8 * 8)


def launch(a, b, c, *, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, EPI_TMA=1, LOADER_REGS=40,
           SYNC=1, SUBTILE=1, PINGPONG=0, EPILOGUE="none", TRANS_B=0, scratch=None):
    """c = a @ b (b.T when TRANS_B), c in a's dtype (fp16 or bf16). SUBTILE=2 keeps the tile as two accumulators
    of half its width and stores c half by half (a staging buffer of half the tile: room for one more stage).
    PINGPONG=1 (num_warps=8) runs two math warpgroups of 4 warps, each on a whole BLOCK_M x BLOCK_N tile of its
    own, taking turns at the tensor cores so that one's epilogue overlaps the other's k-loop."""
    if SUBTILE not in (1, 2) or (SUBTILE == 2 and not EPI_TMA):
        raise ValueError(f"SUBTILE={SUBTILE}: 1, or 2 with the TMA-store epilogue (EPI_TMA=1)")
    if PINGPONG not in (0, 1) or (PINGPONG and (num_warps != 8 or SUBTILE != 1 or not EPI_TMA)):
        raise ValueError(f"PINGPONG={PINGPONG}: 0, or 1 with num_warps=8 (two math warpgroups), SUBTILE=1 and "
                         "the TMA-store epilogue (EPI_TMA=1)")
    if EPILOGUE != "none":
        raise ValueError(f"the gluon_ws template has no {EPILOGUE!r} epilogue (only 'none')")
    if not a.is_cuda:
        raise RuntimeError("the gluon_ws template runs on sm_90 GPUs only (Gluon has no interpreter)")
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype or c.dtype != a.dtype:
        raise ValueError(f"gluon_ws needs fp16/bf16 a, b and c of one dtype (got {a.dtype}, {b.dtype}, {c.dtype})")
    if a.stride(1) != 1 or b.stride(1) != 1 or c.stride(1) != 1:
        raise ValueError("gluon_ws needs row-major a, b and c (TMA descriptors)")
    M, K = a.shape
    N = b.shape[0] if TRANS_B else b.shape[1]
    dt = _TORCH_TO_GL[a.dtype]
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], dt))
    b_block = [BLOCK_N, BLOCK_K] if TRANS_B else [BLOCK_K, BLOCK_N]
    b_desc = TensorDescriptor.from_tensor(b, b_block, gl.NVMMASharedLayout.get_default_for(b_block, dt))
    c_block = [BLOCK_M, BLOCK_N // SUBTILE]
    c_desc = TensorDescriptor.from_tensor(c, c_block, gl.NVMMASharedLayout.get_default_for(c_block, dt))
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    programs = max(1, min(tiles, torch.cuda.get_device_properties(a.device).multi_processor_count))
    if PINGPONG:
        _gemm_pingpong_kernel[(programs,)](
            a_desc, b_desc, c_desc, M, N, K,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, STAGES=num_stages, TRANS_B=TRANS_B,
            MATH_REGS=pingpong_math_registers(LOADER_REGS), LOADER_REGS=LOADER_REGS, num_warps=4,
            maxnreg=max_registers(8))
        return
    _gemm_ws_kernel[(programs,)](
        a_desc, b_desc, c_desc, c, c.stride(0), M, N, K,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, STAGES=num_stages, TRANS_B=TRANS_B,
        EPI_TMA=EPI_TMA, SYNC=SYNC, LOADER_REGS=LOADER_REGS, SUBTILE=SUBTILE, num_warps=num_warps,
        maxnreg=max_registers(num_warps))

"""Attention forward as a warp-specialized Hopper kernel written in Gluon (sm_90 only; Gluon has no interpreter):
the FlashAttention-3 structure, for MHA and GQA, causal or not, head dims 64 and 128.

A tile is 2 * BLOCK_M query rows of one (batch, q head). A program takes one tile, or with PERSISTENT=1 (one
program a streaming multiprocessor) walks every programs-th tile, so the ring, the barriers and the registers are set
up once and the next tile's loads start under the last one's product and store. It has three partitions of warps:
- the loader, one warp: TMA-copies the tile's two BLOCK_M-row q tiles (once both consumers have every score of the
  tile before), then the head's K and V blocks (BLOCK_N keys each) into a ring of `num_stages` shared-memory
  slots. K and V of a slot have "ready" barriers of their own (the scores can start before V has landed); a slot's
  "empty" barrier completes when both consumers have released it.
- two consumer warpgroups of 4 warps, each with BLOCK_M of the rows (one warpgroup MMA is 64 rows): for KV block j
  it issues the scores s_j = q k_j^T and, behind them, o += p_{j-1} v_{j-1} (the probabilities of the block before,
  kept in registers as the MMA's left operand), then runs the online softmax of s_j while that product is still
  on the tensor cores (the overlap inside a warpgroup). Then it waits for it, releases block j-1's slot and
  rescales o. The running max is kept scaled, so each score costs one multiply-subtract (an FMA) before exp2.
- PINGPONG=1: the two consumers take turns issuing their MMAs (an mbarrier pair, strict alternation), so one's
  softmax runs while the other's products occupy the tensor cores, instead of both competing for them at once.
  PINGPONG=0 lets them run free (kept to measure what the turns are worth).
- OVERLAP=0 takes one block at a time (scores, softmax, rescale, product, each waited for): the same partitions
  without the overlap inside a warpgroup, kept to measure that overlap and as the simplest order to compare with.

Causal (CAUSAL=1): a tile reads the KV blocks up to its last row only (block skipping), masks the keys above each
row in the blocks that cross the diagonal, and tiles are handed out heaviest (last rows) first, across heads. Every
row has key 0 in its first block, so its running max is finite from then on and fully masked blocks add
exp2(-inf) = 0.

Loads go through 2D TMA descriptors over [B * heads * S, D]: the rows a block takes past its head's S (from the
next head, or zero fill at the end of the tensor) are masked in the scores like keys past S, and query rows past S
are computed but never stored: the output is a masked store from registers (a 2D TMA store of the last tile would
write into the next head's rows).

Registers: 12 warps (two consumer warpgroups and the loader's) built at maxnreg 168; the loader gives back down to
LOADER_REGS and each consumer thread gets what is left (232 at 40). A consumer holds o (BLOCK_M x D fp32), the
scores (BLOCK_M x BLOCK_N fp32) and the previous block's probabilities (BLOCK_M x BLOCK_N, 16-bit).
"""

import math

import torch
import triton

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

LOG2E = 1.4426950408889634
_TORCH_TO_GL = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
# a barrier over the warps of the calling partition: `thread_barrier` in Triton 3.6, `barrier` in 3.9
_sync_warps = getattr(gl, "thread_barrier", None) or getattr(gl, "barrier", None)
# TMA loads: `async_copy_global_to_shared` in 3.6, `async_load` in 3.9 (same positional arguments)
_tma_load = getattr(tma, "async_load", None) or getattr(tma, "async_copy_global_to_shared", None)

CONSUMERS = 2
CONSUMER_WARPS = 4
LOADER_WARPS = 1
REGISTERS = 65536  # per SM on sm_90


@gluon.constexpr_function
def _mma_layout(n):
    """A warpgroup-MMA accumulator of 64 rows (4 warps stacked along M, 16 rows each) and n columns."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, n, 16])


@gluon.jit
def _tile(t, num_m, BH, H, HKV, S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """Tile t of the walk over (q tile, batch * q head): its first query row, its batch * q head, the first row of
    its kv head and its number of KV blocks. Non-causal: q tiles fastest, so programs side by side read one head's
    K and V; causal: heads fastest over the q tiles from the last (heaviest) down, so the longest tiles start first."""
    if CAUSAL:
        bh = t % BH
        first_row = (num_m - 1 - t // BH) * (2 * BLOCK_M)
        n_blocks = gl.cdiv(gl.minimum(first_row + 2 * BLOCK_M, S), BLOCK_N)
    else:
        bh = t // num_m
        first_row = (t % num_m) * (2 * BLOCK_M)
        n_blocks = gl.cdiv(S, BLOCK_N)
    kv_row0 = ((bh // H) * HKV + (bh % H) // (H // HKV)) * S
    return first_row, bh, kv_row0, n_blocks


@gluon.jit
def _loader_tile(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty,
                 t, it, tc, num_m, BH, H, HKV, S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 STAGES: gl.constexpr, CAUSAL: gl.constexpr, Q_BYTES: gl.constexpr, KV_BYTES: gl.constexpr):
    """The loads of tile t, from ring position `it`, as this program's tc-th tile; returns (it, tc) after it."""
    first_row, bh, kv_row0, n_blocks = _tile(t, num_m, BH, H, HKV, S, BLOCK_M, BLOCK_N, CAUSAL)
    # the q tiles are free once both consumers have every score of the tile before (the first wait passes on the
    # fresh barrier)
    mbarrier.wait(q_empty, (tc & 1) ^ 1)
    for c in gl.static_range(2):
        mbarrier.expect(q_ready.index(c), Q_BYTES)
        _tma_load(q_desc, [bh * S + first_row + c * BLOCK_M, 0], q_ready.index(c), q_smem.index(c))
    for j in range(n_blocks):
        s = it % STAGES
        # a fresh barrier counts as having completed the phase before phase 0: the first lap does not wait
        mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(s), KV_BYTES)
        _tma_load(k_desc, [kv_row0 + j * BLOCK_N, 0], k_ready.index(s), k_bufs.index(s))
        mbarrier.expect(v_ready.index(s), KV_BYTES)
        _tma_load(v_desc, [kv_row0 + j * BLOCK_N, 0], v_ready.index(s), v_bufs.index(s))
        it += 1
    return it, tc + 1


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty,
            num_m, BH, H, HKV, S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
            CAUSAL: gl.constexpr, PERSISTENT: gl.constexpr, Q_BYTES: gl.constexpr, KV_BYTES: gl.constexpr):
    if PERSISTENT:
        it = 0   # ring position of the next K/V block, over every tile of this program
        tc = 0   # tiles of this program so far
        for t in range(gl.program_id(0), num_m * BH, gl.num_programs(0)):
            it, tc = _loader_tile(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready,
                                  empty, t, it, tc, num_m, BH, H, HKV, S, BLOCK_M, BLOCK_N, STAGES, CAUSAL, Q_BYTES,
                                  KV_BYTES)
    else:
        # ring position 0 as a run-time value: the block loop carries it (a constexpr would change type there)
        _loader_tile(q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty,
                     gl.program_id(0), gl.to_tensor(0), 0, num_m, BH, H, HKV, S, BLOCK_M, BLOCK_N, STAGES, CAUSAL,
                     Q_BYTES, KV_BYTES)


@gluon.jit
def _release(bar):
    """One arrival on `bar` for this partition, once every warp of it is past what came before."""
    _sync_warps()
    mbarrier.arrive(bar, count=1)


@gluon.jit
def _take_turn(turn, t, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr):
    """Wait for this consumer's t-th turn at the tensor cores: consumer 0's first wait passes on the fresh barrier,
    consumer 1's t-th needs consumer 0's t-th hand-over, consumer 0's t-th (t > 0) consumer 1's (t-1)-th. The
    turns alternate strictly, so a barrier's phase parity never stands for a turn two away."""
    if PINGPONG:
        if CONSUMER == 0:
            mbarrier.wait(turn.index(0), (t & 1) ^ 1)
        else:
            mbarrier.wait(turn.index(1), t & 1)


@gluon.jit
def _hand_over(turn, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr):
    """This consumer's MMAs are issued: the other's turn (every warp past its issue first, then one arrive)."""
    if PINGPONG:
        _release(turn.index(1 - CONSUMER))


@gluon.jit
def _softmax(qk, m_i, l_i, rows, cols, start_n, unmasked_end, S, qk_scale, CAUSAL: gl.constexpr,
             BLOCK_N: gl.constexpr):
    """The online-softmax step of one block of scores: masks (only in blocks that cross the diagonal or S), the new
    running max (scaled), the probabilities (one FMA and an exp2 a score), the rescale factor and the row sums."""
    if start_n + BLOCK_N > unmasked_end:
        keys = start_n + cols
        keep = keys[None, :] < S
        if CAUSAL:
            keep = keep & (keys[None, :] <= rows[:, None])
        qk = gl.where(keep, qk, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(qk, axis=1) * qk_scale)
    probs = gl.exp2(qk * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(probs, axis=1)
    return probs, alpha, m_new, l_i


@gluon.jit
def _consumer_tile(q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty, turn, O, stride_os,
                   t, it, turns, tc, num_m, BH, H, HKV, S, qk_scale,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                   CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, OVERLAP: gl.constexpr, CONSUMER: gl.constexpr):
    """This consumer's rows of tile t: its first K/V block at ring position `it`, its first turn `turns`, the
    program's tc-th tile; returns (it, turns, tc) after it."""
    s_layout: gl.constexpr = _mma_layout(BLOCK_N)
    o_layout: gl.constexpr = _mma_layout(HEAD_DIM)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    dtype: gl.constexpr = q_smem.dtype
    q = q_smem.index(CONSUMER)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    first_row, bh, kv_row0, n_blocks = _tile(t, num_m, BH, H, HKV, S, BLOCK_M, BLOCK_N, CAUSAL)
    # this consumer's query rows, as positions in the sequence
    rows = first_row + CONSUMER * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    # keys before `unmasked_end` are visible to every row of this consumer (and inside the sequence)
    if CAUSAL:
        unmasked_end = gl.minimum(first_row + CONSUMER * BLOCK_M + 1, S)
    else:
        unmasked_end = S
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
    mbarrier.wait(q_ready.index(CONSUMER), tc & 1)
    if OVERLAP:
        # block 0: its scores alone (no product of a block before it)
        _take_turn(turn, turns, CONSUMER, PINGPONG)
        mbarrier.wait(k_ready.index(it % STAGES), (it // STAGES) & 1)
        qk = warpgroup_mma(q, k_bufs.index(it % STAGES).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        _hand_over(turn, CONSUMER, PINGPONG)
        qk = warpgroup_mma_wait(0, deps=(qk,))
        probs, alpha, m_i, l_i = _softmax(qk, m_i, l_i, rows, cols, 0, unmasked_end, S, qk_scale, CAUSAL,
                                          BLOCK_N)
        p = gl.convert_layout(probs.to(dtype), p_layout)
        for j in range(1, n_blocks):
            pos = it + j
            slot = pos % STAGES
            prev = (pos - 1) % STAGES
            _take_turn(turn, turns + j, CONSUMER, PINGPONG)
            mbarrier.wait(k_ready.index(slot), (pos // STAGES) & 1)
            qk = warpgroup_mma(q, k_bufs.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
            mbarrier.wait(v_ready.index(prev), ((pos - 1) // STAGES) & 1)
            acc = warpgroup_mma(p, v_bufs.index(prev), acc, is_async=True)
            _hand_over(turn, CONSUMER, PINGPONG)
            # the scores are the older MMA: at most the product p.v still in flight
            qk = warpgroup_mma_wait(1, deps=(qk,))
            probs, alpha, m_i, l_i = _softmax(qk, m_i, l_i, rows, cols, j * BLOCK_N, unmasked_end, S, qk_scale,
                                              CAUSAL, BLOCK_N)
            acc, p = warpgroup_mma_wait(0, deps=(acc, p))  # p: the product's register operand, kept alive
            # block j - 1 is done with: both consumers' arrivals free its slot
            _release(empty.index(prev))
            acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
            p = gl.convert_layout(probs.to(dtype), p_layout)
        # every score of the tile is complete: the q tiles may be refilled for the next one
        _release(q_empty)
        # the last block's product, in a turn of its own
        last = it + n_blocks - 1
        _take_turn(turn, turns + n_blocks, CONSUMER, PINGPONG)
        mbarrier.wait(v_ready.index(last % STAGES), (last // STAGES) & 1)
        acc = warpgroup_mma(p, v_bufs.index(last % STAGES), acc, is_async=True)
        _hand_over(turn, CONSUMER, PINGPONG)
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))  # p: the product's register operand, kept alive
        _release(empty.index(last % STAGES))
        turns += n_blocks + 1
    else:
        # one block at a time: scores, softmax, rescale, product, each waited for before the next
        for j in range(n_blocks):
            pos = it + j
            slot = pos % STAGES
            phase = (pos // STAGES) & 1
            _take_turn(turn, turns + j, CONSUMER, PINGPONG)
            mbarrier.wait(k_ready.index(slot), phase)
            qk = warpgroup_mma(q, k_bufs.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
            _hand_over(turn, CONSUMER, PINGPONG)
            qk = warpgroup_mma_wait(0, deps=(qk,))
            probs, alpha, m_i, l_i = _softmax(qk, m_i, l_i, rows, cols, j * BLOCK_N, unmasked_end, S, qk_scale,
                                              CAUSAL, BLOCK_N)
            acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
            p = gl.convert_layout(probs.to(dtype), p_layout)
            mbarrier.wait(v_ready.index(slot), phase)
            acc = warpgroup_mma(p, v_bufs.index(slot), acc, is_async=True)
            acc, p = warpgroup_mma_wait(0, deps=(acc, p))  # p: the product's register operand, kept alive
            _release(empty.index(slot))
        _release(q_empty)
        turns += n_blocks
    out = acc / gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))[:, None]
    offs_m = CONSUMER * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, o_layout))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    o_row0 = bh.to(gl.int64) * S + first_row
    ptrs = O + (o_row0 + offs_m.to(gl.int64))[:, None] * stride_os + offs_d[None, :]
    gl.store(ptrs, out.to(dtype), mask=offs_m[:, None] < S - first_row)
    return it + n_blocks, turns, tc + 1


@gluon.jit
def _consumer(q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty, turn, O, stride_os,
              num_m, BH, H, HKV, S, qk_scale,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
              CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, OVERLAP: gl.constexpr, PERSISTENT: gl.constexpr,
              CONSUMER: gl.constexpr):
    if PERSISTENT:
        it = 0       # ring position of the tile's first K/V block (the loader's order)
        turns = 0    # this consumer's turns at the tensor cores so far
        tc = 0       # tiles of this program so far
        for t in range(gl.program_id(0), num_m * BH, gl.num_programs(0)):
            it, turns, tc = _consumer_tile(q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty, turn, O,
                                           stride_os, t, it, turns, tc, num_m, BH, H, HKV, S, qk_scale, BLOCK_M,
                                           BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP, CONSUMER)
    else:
        _consumer_tile(q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty, turn, O, stride_os,
                       gl.program_id(0), 0, 0, 0, num_m, BH, H, HKV, S, qk_scale, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES,
                       CAUSAL, PINGPONG, OVERLAP, CONSUMER)


@gluon.jit
def _attn_fwd_ws(q_desc, k_desc, v_desc, O, stride_os, BH, H, HKV, S, qk_scale,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                 CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, OVERLAP: gl.constexpr, PERSISTENT: gl.constexpr,
                 CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr):
    """One tile a program; PERSISTENT: one program a streaming multiprocessor, walking tiles program_id,
    program_id + programs, ..."""
    num_m = gl.cdiv(S, 2 * BLOCK_M)
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, HEAD_DIM], q_desc.layout)
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_empty, count=2)  # one arrival from each consumer
    for i in gl.static_range(2):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(turn.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival from each consumer
    Q_BYTES: gl.constexpr = BLOCK_M * HEAD_DIM * (dtype.primitive_bitwidth // 8)
    KV_BYTES: gl.constexpr = BLOCK_N * HEAD_DIM * (dtype.primitive_bitwidth // 8)
    gl.warp_specialize([
        (_consumer, (q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty, turn, O, stride_os,
                     num_m, BH, H, HKV, S, qk_scale, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP,
                     PERSISTENT, 0)),
        (_consumer, (q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty, turn, O, stride_os,
                     num_m, BH, H, HKV, S, qk_scale, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP,
                     PERSISTENT, 1)),
        (_loader, (q_desc, k_desc, v_desc, q_smem, k_bufs, v_bufs, q_ready, q_empty, k_ready, v_ready, empty,
                   num_m, BH, H, HKV, S, BLOCK_M, BLOCK_N, STAGES, CAUSAL, PERSISTENT, Q_BYTES, KV_BYTES)),
    ], [4, 1], [CONSUMER_REGS, LOADER_REGS])  # consumer 1: a warpgroup; the loader: one warp


def max_registers() -> int:
    """The `maxnreg` every thread is built with: the register file over the 12 warps (two consumer warpgroups and
    the loader's warpgroup: registers are allocated per 4 warps), rounded down to a multiple of 8."""
    threads = (CONSUMERS * CONSUMER_WARPS + 4) * 32
    return min(255, REGISTERS // threads) // 8 * 8


def consumer_registers(loader_regs: int = 40) -> int:
    """Registers a consumer thread gets: the register file at maxnreg less what the loader's warpgroup keeps, shared
    by the two consumer warpgroups, rounded down to 8."""
    left = max_registers() * 12 * 32 - loader_regs * 4 * 32
    return min(248, left // (CONSUMERS * CONSUMER_WARPS * 32) // 8 * 8)


def launch(q, k, v, o, *, BLOCK_M=64, BLOCK_N, num_warps=8, num_stages=2, CAUSAL=0, PINGPONG=1, OVERLAP=1,
           PERSISTENT=0, LOADER_REGS=40):
    """q [B, H, S, D], k and v [B, HKV, S, D] (H % HKV == 0), o [B, H, S, D], all contiguous, fp16 or bf16.
    BLOCK_M is the rows of each consumer warpgroup (64: one warpgroup MMA); a tile is 2 * BLOCK_M rows of one head.
    num_warps counts both consumer warpgroups (8); the loader's warp comes on top. PERSISTENT=1: one program a
    streaming multiprocessor, walking the tiles; otherwise one program a tile."""
    if not q.is_cuda:
        raise RuntimeError("the gluon_fa template runs on sm_90 GPUs only (Gluon has no interpreter)")
    if BLOCK_M != 64 or num_warps != CONSUMERS * CONSUMER_WARPS:
        raise ValueError(f"gluon_fa: BLOCK_M=64 rows per consumer warpgroup and num_warps=8 (two warpgroups); got "
                         f"BLOCK_M={BLOCK_M}, num_warps={num_warps}")
    flags = dict(PINGPONG=PINGPONG, OVERLAP=OVERLAP, PERSISTENT=PERSISTENT, CAUSAL=CAUSAL)
    if any(v not in (0, 1) for v in flags.values()):
        raise ValueError(f"gluon_fa: {', '.join(flags)} are 0 or 1 (got {flags})")
    if q.dtype not in _TORCH_TO_GL or k.dtype != q.dtype or v.dtype != q.dtype or o.dtype != q.dtype:
        raise ValueError(f"gluon_fa needs fp16/bf16 q, k, v and o of one dtype (got {q.dtype}, {k.dtype}, "
                         f"{v.dtype}, {o.dtype})")
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and o.is_contiguous()):
        raise ValueError("gluon_fa needs contiguous q, k, v and o (2D TMA views over [B * heads * S, D])")
    B, H, S, D = q.shape
    HKV = k.shape[1]
    if D not in (64, 128) or H % HKV:
        raise ValueError(f"gluon_fa: head dim 64 or 128 and kv heads dividing q heads (got D={D}, H={H}, HKV={HKV})")
    dt = _TORCH_TO_GL[q.dtype]
    q_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, D], dt)
    kv_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D], dt)
    q_desc = TensorDescriptor.from_tensor(q.view(B * H * S, D), [BLOCK_M, D], q_layout)
    k_desc = TensorDescriptor.from_tensor(k.view(B * HKV * S, D), [BLOCK_N, D], kv_layout)
    v_desc = TensorDescriptor.from_tensor(v.view(B * HKV * S, D), [BLOCK_N, D], kv_layout)
    programs = triton.cdiv(S, 2 * BLOCK_M) * B * H
    if PERSISTENT:
        programs = min(programs, torch.cuda.get_device_properties(q.device).multi_processor_count)
    _attn_fwd_ws[(programs,)](q_desc, k_desc, v_desc, o, o.stride(2), B * H, H, HKV, S, LOG2E / math.sqrt(D),
                              BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=D, STAGES=num_stages, CAUSAL=CAUSAL,
                              PINGPONG=PINGPONG, OVERLAP=OVERLAP, PERSISTENT=PERSISTENT,
                              CONSUMER_REGS=consumer_registers(LOADER_REGS), LOADER_REGS=LOADER_REGS,
                              num_warps=CONSUMER_WARPS, maxnreg=max_registers())

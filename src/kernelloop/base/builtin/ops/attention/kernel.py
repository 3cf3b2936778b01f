"""Scaled-dot-product attention forward: FlashAttention-2 style online softmax, MHA and GQA, causal or not.

One program computes one BLOCK_M tile of query rows of one (batch, q head) and streams that head's K/V in
BLOCK_N blocks: s = q k^T (fp32 accumulation), running max m of the scaled rows and row sum l in fp32, the
probabilities rounded to the op dtype for the P.V product (fp32 accumulation), o = acc / l at the end.
The scale is 1/sqrt(D), computed in `launch` from the head dim (the spec has no scalar for it); it is
folded with log2(e) so the kernel uses exp2.

GQA: q head h reads kv head h // (H // HKV) (torch's `repeat_interleave` / `enable_gqa` convention).

The KV loop has two phases, so that only the blocks that need masks pay for them:
  phase 1, unmasked: KV blocks that are entirely inside the sequence and (causal) entirely at or below the
           diagonal of every row of the tile;
  phase 2, masked:   the rest -- the partial last block (S not divisible by BLOCK_N) and, in causal mode, the
           diagonal blocks (key index <= query index); masked scores are -inf.
Non-causal with EVEN_S (S % BLOCK_N == 0, set by `launch`) has no phase 2 at all: the kernel has one loop.
Causal with CAUSAL_SKIP=0 runs every KV block through phase 2 (blocks above the diagonal fully masked):
the same result with twice the work, kept as the baseline of the block-skipping optimisation.
Every row has key 0 in the first block it processes, so the running max is finite from then on and fully
masked rows of later blocks add exp2(-inf) = 0 without NaNs. Rows past S (the last tile) are computed on
zero-or-neighbour inputs and never stored.

Program order (KV_ORDER) -- which tiles run side by side, and so which K/V blocks are shared in L2:
  0  q tiles fastest: consecutive program ids walk the q tiles of one (batch, q head); resident programs
     stream the same K/V (the FlashAttention / Triton tutorial grid).
  1  GQA group fastest: consecutive ids walk the q heads that share one kv head, then the q tiles, then
     the kv heads and batches; resident programs read the same K/V block at about the same time. Only
     differs from 0 when H > HKV.
  2  heads fastest: consecutive ids walk (batch, q head) for one q tile; resident programs read different
     K/V (little L2 reuse) but every wave has the same amount of work.
In causal mode every order hands out the heaviest q tiles (the last rows) first, to shorten the tail.

Hopper options:
  USE_TMA    Q, K and V tiles are loaded through TMA descriptors over 2D views [B*heads*S, D]: 1 host-built
             ones (triton.tools.tensor_descriptor), 2 device-side ones (`tl.make_tensor_descriptor`; their
             scratch comes from the allocator the worker sets with `triton.set_allocator`, as the static rules
             forbid allocating in `launch`). The output keeps the masked pointer store, because a 2D TMA store
             of the last tile would spill into the next head's rows. Rows a descriptor load takes from the
             next head (or zero padding at the end) are masked in the scores like any row past S.
  WARP_SPEC  `tl.range(..., warp_specialize=True)` on the KV loops: the compiler splits loads, MMAs and
             softmax into warp groups. The specs allow it on sm_100+ with host TMA only. For sm_90, Triton
             3.6's Hopper pass specializes device descriptors (USE_TMA=2), 4 warps and a single loop
             (non-causal, EVEN_S) in ahead-of-time builds, but on the H200 the same configurations failed to
             compile ("PassManager::run failed", see the constraint's note in spec.toml): pruned there.
Both are reached only through constexpr branches and a lazy import, so a Triton that lacks one of them fails
the configurations that ask for it, not the others.
"""

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _attn_block(acc, l_i, m_i, q, offs_m, start_n, S, qk_scale,
                K_head, V_head, stride_kn, stride_vn, desc_k, desc_v, kv_row0,
                HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                USE_TMA: tl.constexpr, DOT_F32: tl.constexpr):
    """One KV block: scores, online-softmax update of (m, l), and acc += P.V."""
    start_n = tl.multiple_of(start_n, BLOCK_N)
    kn = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    if USE_TMA:
        k = desc_k.load([kv_row0 + start_n, 0])
    elif MASKED:
        k = tl.load(K_head + kn[:, None] * stride_kn + offs_d[None, :], mask=kn[:, None] < S, other=0.0)
    else:
        k = tl.load(K_head + kn[:, None] * stride_kn + offs_d[None, :])
    if DOT_F32:
        k = k.to(tl.float32)
    # Raw scores; the scale (> 0) is applied to the row max and then fused into one multiply-subtract per score
    # (an FMA) instead of a multiply of the whole tile followed by a subtraction.
    s = tl.dot(q, tl.trans(k))
    if MASKED:
        keep = kn[None, :] < S
        if CAUSAL:
            keep = keep & (kn[None, :] <= offs_m[:, None])
        s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    if USE_TMA:
        v = desc_v.load([kv_row0 + start_n, 0])
    elif MASKED:
        v = tl.load(V_head + kn[:, None] * stride_vn + offs_d[None, :], mask=kn[:, None] < S, other=0.0)
    else:
        v = tl.load(V_head + kn[:, None] * stride_vn + offs_d[None, :])
    if DOT_F32:  # the same rounding of p as on the GPU, then an exact fp32 product
        acc = tl.dot(p.to(V_head.dtype.element_ty).to(tl.float32), v.to(tl.float32), acc)
    else:
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


@triton.jit
def _attn_kv_loop(acc, l_i, m_i, q, offs_m, lo, hi, S, qk_scale,
                  K_head, V_head, stride_kn, stride_vn, desc_k, desc_v, kv_row0,
                  HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                  USE_TMA: tl.constexpr, WARP_SPEC: tl.constexpr, DOT_F32: tl.constexpr):
    # `warp_specialize` is only spelled out when asked for, so a Triton without it fails those configs alone.
    if WARP_SPEC:
        for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=True):
            acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, offs_m, start_n, S, qk_scale, K_head, V_head,
                                        stride_kn, stride_vn, desc_k, desc_v, kv_row0,
                                        HEAD_DIM, BLOCK_N, MASKED, CAUSAL, USE_TMA, DOT_F32)
    else:
        for start_n in range(lo, hi, BLOCK_N):
            acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, offs_m, start_n, S, qk_scale, K_head, V_head,
                                        stride_kn, stride_vn, desc_k, desc_v, kv_row0,
                                        HEAD_DIM, BLOCK_N, MASKED, CAUSAL, USE_TMA, DOT_F32)
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, desc_q, desc_k, desc_v,
              stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
              stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
              B, H, HKV, S, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, CAUSAL_SKIP: tl.constexpr, KV_ORDER: tl.constexpr,
              USE_TMA: tl.constexpr, WARP_SPEC: tl.constexpr, DOT_F32: tl.constexpr, EVEN_S: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(S, BLOCK_M)
    group = H // HKV
    if KV_ORDER == 0:
        tile = pid % num_m
        bh = pid // num_m
        b = bh // H
        h = bh % H
    elif KV_ORDER == 1:
        g = pid % group
        rest = pid // group
        tile = rest % num_m
        rest = rest // num_m
        kvh_ = rest % HKV
        b = rest // HKV
        h = kvh_ * group + g
    else:
        bh = pid % (B * H)
        tile = pid // (B * H)
        b = bh // H
        h = bh % H
    if CAUSAL:
        tile = num_m - 1 - tile  # heaviest tiles first
    kvh = h // group
    start_m = tile * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    b64 = b.to(tl.int64)
    K_head = K + b64 * stride_kb + kvh.to(tl.int64) * stride_kh
    V_head = V + b64 * stride_vb + kvh.to(tl.int64) * stride_vh
    kv_row0 = (b * HKV + kvh) * S  # first row of this kv head in the [B*HKV*S, D] descriptor views
    if USE_TMA == 2:  # device-side descriptors over the same 2D views as launch's host ones
        desc_q = tl.make_tensor_descriptor(Q, [B * H * S, HEAD_DIM], [stride_qs, 1], [BLOCK_M, HEAD_DIM])
        desc_k = tl.make_tensor_descriptor(K, [B * HKV * S, HEAD_DIM], [stride_ks, 1], [BLOCK_N, HEAD_DIM])
        desc_v = tl.make_tensor_descriptor(V, [B * HKV * S, HEAD_DIM], [stride_vs, 1], [BLOCK_N, HEAD_DIM])
    if USE_TMA:
        q = desc_q.load([(b * H + h) * S + start_m, 0])
    else:
        Q_head = Q + b64 * stride_qb + h.to(tl.int64) * stride_qh
        q = tl.load(Q_head + offs_m[:, None] * stride_qs + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
    if DOT_F32:
        q = q.to(tl.float32)

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    if CAUSAL:
        if CAUSAL_SKIP:
            full_end = (start_m // BLOCK_N) * BLOCK_N     # keys below every row of the tile
            end = tl.minimum(start_m + BLOCK_M, S)        # nothing above the tile's last row
        else:
            full_end = 0
            end = S
    else:
        full_end = (S // BLOCK_N) * BLOCK_N
        end = S
    acc, l_i, m_i = _attn_kv_loop(acc, l_i, m_i, q, offs_m, 0, full_end, S, qk_scale,
                                  K_head, V_head, stride_ks, stride_vs, desc_k, desc_v, kv_row0,
                                  HEAD_DIM, BLOCK_N, False, CAUSAL, USE_TMA, WARP_SPEC, DOT_F32)
    if CAUSAL or not EVEN_S:  # phase 2 is empty otherwise: leaving it out keeps the kernel to one loop
        acc, l_i, m_i = _attn_kv_loop(acc, l_i, m_i, q, offs_m, full_end, end, S, qk_scale,
                                      K_head, V_head, stride_ks, stride_vs, desc_k, desc_v, kv_row0,
                                      HEAD_DIM, BLOCK_N, True, CAUSAL, USE_TMA, WARP_SPEC, DOT_F32)
    out = acc / l_i[:, None]
    O_head = O + b64 * stride_ob + h.to(tl.int64) * stride_oh
    tl.store(O_head + offs_m[:, None] * stride_os + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=offs_m[:, None] < S)


def launch(q, k, v, o, *, BLOCK_M, BLOCK_N, num_warps, num_stages=2, KV_ORDER=0, CAUSAL=0, CAUSAL_SKIP=1,
           USE_TMA=0, WARP_SPEC=0):
    """q [B, H, S, D], k and v [B, HKV, S, D] (H % HKV == 0), o [B, H, S, D]; the last dim contiguous."""
    B, H, S, D = q.shape
    HKV = k.shape[1]
    if q.stride(3) != 1 or k.stride(3) != 1 or v.stride(3) != 1 or o.stride(3) != 1:
        raise ValueError("attention: the head dim of q, k, v and o must be contiguous")
    qk_scale = LOG2E / math.sqrt(D)
    # The Triton interpreter (CPU tensors) multiplies the bit patterns of bfloat16 dot operands
    # (triton-lang/triton#11584, "not supported yet"): there, upcast them to fp32 in the kernel -- exact for
    # bf16 values, fp32 accumulation as on the GPU. Compiled kernels always use the native bf16 dot.
    dot_f32 = q.device.type == "cpu" and q.dtype == torch.bfloat16
    if USE_TMA == 2:
        # The kernel builds the descriptors (their 128-byte scratch comes from the allocator the worker sets,
        # see kernelloop.core.execute.worker); the views only check that the 2D layouts exist.
        q.view(B * H * S, D), k.view(B * HKV * S, D), v.view(B * HKV * S, D)
        desc_q, desc_k, desc_v = q, k, v
    elif USE_TMA:
        # imported here so a Triton without host descriptors fails the TMA configurations alone
        from triton.tools.tensor_descriptor import TensorDescriptor
        desc_q = TensorDescriptor.from_tensor(q.view(B * H * S, D), [BLOCK_M, D])
        desc_k = TensorDescriptor.from_tensor(k.view(B * HKV * S, D), [BLOCK_N, D])
        desc_v = TensorDescriptor.from_tensor(v.view(B * HKV * S, D), [BLOCK_N, D])
    else:
        desc_q, desc_k, desc_v = q, k, v
    grid = (triton.cdiv(S, BLOCK_M) * B * H,)
    _attn_fwd[grid](q, k, v, o, desc_q, desc_k, desc_v,
                    q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                    v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                    B, H, HKV, S, qk_scale,
                    HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=CAUSAL, CAUSAL_SKIP=CAUSAL_SKIP,
                    KV_ORDER=KV_ORDER, USE_TMA=USE_TMA, WARP_SPEC=WARP_SPEC, DOT_F32=dot_f32,
                    EVEN_S=S % BLOCK_N == 0,
                    num_warps=num_warps, num_stages=num_stages)

"""Rotary embedding of q and k in one pass: out = x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[D/2:],
x[:D/2]), in fp32, rounded once. q [B, S, HQ, D] and k [B, S, HK, D] are the projections' layout (the model's
transpose to [B, H, S, D] is a view of the result); cos and sin [C, S, D] with C = 1 (shared by the batch) or B.
A program takes POS positions (b, s): cos and sin read once for all HQ + HK heads, BLOCK_H heads at a time.

launch(q, k, cos, sin, qo, ko, *, POS, BLOCK_H, num_warps)
"""

import triton
import triton.language as tl

# {COMMON}

@triton.jit
def _rotate(X, Out, base, H, D, c, sn, d, rot, sign, dmask,
            BLOCK_H: tl.constexpr, INTERPRETER: tl.constexpr):
    for h0 in range(0, H, BLOCK_H):
        hs = h0 + tl.arange(0, BLOCK_H)
        m = (hs[:, None] < H) & dmask[None, :]
        rows = base + hs[:, None].to(tl.int64) * D
        x = tl.load(X + rows + d[None, :], mask=m, other=0.0).to(tl.float32)
        xr = tl.load(X + rows + rot[None, :], mask=m, other=0.0).to(tl.float32)
        y = x * c[None, :] + sign[None, :] * xr * sn[None, :]
        tl.store(Out + rows + d[None, :], _round(y, Out.dtype.element_ty, INTERPRETER), mask=m)


@triton.jit
def _rotary(Q, K, Cos, Sin, QO, KO, B, S, HQ, HK, D, cos_batch_stride,
            BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr, POS: tl.constexpr, INTERPRETER: tl.constexpr):
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    half = D // 2
    rot = tl.where(d < half, d + half, d - half)
    sign = tl.where(d < half, -1.0, 1.0)
    for i in tl.static_range(POS):
        p = tl.program_id(0) * POS + i
        if p < B * S:
            b = p // S
            s = p % S
            cs = b.to(tl.int64) * cos_batch_stride + s * D
            c = tl.load(Cos + cs + d, mask=dmask, other=0.0).to(tl.float32)
            sn = tl.load(Sin + cs + d, mask=dmask, other=0.0).to(tl.float32)
            _rotate(Q, QO, p.to(tl.int64) * HQ * D, HQ, D, c, sn, d, rot, sign, dmask, BLOCK_H, INTERPRETER)
            _rotate(K, KO, p.to(tl.int64) * HK * D, HK, D, c, sn, d, rot, sign, dmask, BLOCK_H, INTERPRETER)


def launch(q, k, cos, sin, qo, ko, *, POS, BLOCK_H, num_warps):
    B, S, HQ, D = q.shape
    HK = k.shape[2]
    C = cos.shape[0]
    if D % 2 or C not in (1, B):
        raise ValueError(f"rotary needs an even D and cos/sin shared by the batch or per batch row (D={D}, C={C})")
    grid = (triton.cdiv(B * S, POS),)
    _rotary[grid](q, k, cos, sin, qo, ko, B, S, HQ, HK, D, 0 if C == 1 else S * D,
                  BLOCK_D=triton.next_power_of_2(D), BLOCK_H=BLOCK_H, POS=POS, INTERPRETER=not q.is_cuda,
                  num_warps=num_warps)

"""Trusted reference: softmax(q k^T / sqrt(D)) v in plain PyTorch (non-causal).

Called on upcast inputs (float64) for the truth and on op-dtype inputs as the eager baseline. GQA: kv head
j serves q heads j*G .. j*G+G-1 (G = H // HKV), i.e. k and v are `repeat_interleave`d along the head axis.
Query rows are processed in chunks so the score matrix never exceeds 2^28 elements (2 GiB in fp64; the
fp64 truth for b1 h32 s16384 would otherwise need 69 GB for the scores alone).
"""

import math

import torch

SCORE_ELEMS = 1 << 28


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    B, H, S, D = q.shape
    group = H // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    kt = k.transpose(-1, -2)
    scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(q)
    rows = max(1, SCORE_ELEMS // (B * H * S))
    for i in range(0, S, rows):
        scores = torch.matmul(q[:, :, i:i + rows], kt) * scale
        out[:, :, i:i + rows] = torch.matmul(torch.softmax(scores, dim=-1), v)
    return out

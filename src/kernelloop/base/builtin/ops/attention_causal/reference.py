"""Trusted reference: softmax(q k^T / sqrt(D) + causal mask) v in plain PyTorch; key j is visible to query
i iff j <= i (queries and keys have the same length, aligned at position 0).

Called on upcast inputs (float64) for the truth and on op-dtype inputs as the eager baseline. GQA: kv head
j serves q heads j*G .. j*G+G-1 (G = H // HKV), i.e. k and v are `repeat_interleave`d along the head axis.
Query rows are processed in chunks so the score matrix never exceeds 2^28 elements; a chunk only reads the
keys it can see.
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
    scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(q)
    rows = max(1, SCORE_ELEMS // (B * H * S))
    for i in range(0, S, rows):
        j = min(S, i + rows)  # queries i..j-1 see keys 0..j-1
        scores = torch.matmul(q[:, :, i:j], k[:, :, :j].transpose(-1, -2)) * scale
        hidden = torch.arange(j, device=q.device)[None, :] > torch.arange(i, j, device=q.device)[:, None]
        scores = scores.masked_fill(hidden, float("-inf"))
        out[:, :, i:j] = torch.matmul(torch.softmax(scores, dim=-1), v[:, :, :j])
    return out

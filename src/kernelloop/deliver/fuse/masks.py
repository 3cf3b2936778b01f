"""Causal masks made explicit by export, given back to SDPA as `is_causal`.

Under tracing, transformers materialises the causal mask (a boolean [B, 1, L, S] tensor built from `arange`s and
compared) and passes it to `scaled_dot_product_attention` as `attn_mask`; eager PyTorch and the model outside the
trace pass no mask and `is_causal=True`. With an explicit mask SDPA cannot take its flash or cuDNN kernels, so the
exported graph runs slower than the model it came from (a Llama-3-8B-shaped decoder at 4x2048 on an H200: 45.6 ms
exported against 42.1 eager), and a composition built on that graph starts behind.

The rewrite is exact or it is not made. For each SDPA call with a mask and `is_causal=False`:
- the mask's value must not depend on the graph's inputs: every node it is computed from is a constant, a
  parameter/buffer read or an ATen call over those (export specialises shapes, so `arange(L)` is a constant);
- the mask is computed, once, here, and must equal the lower triangle `ones(L, S).tril()` broadcast to
  [B, H, L, S] (boolean), or be 0 there and -inf / the dtype's lowest value elsewhere (additive), with L == S,
  which is the mask SDPA applies itself for `is_causal=True`;
- dropout must be 0.
Then the call is given `attn_mask=None, is_causal=True` and the mask's construction is left to dead-code
elimination. Anything else keeps its mask, with the reason recorded.
"""

from __future__ import annotations

import torch
import torch.fx as fx
from pydantic import Field

from ...base.records import Record

SDPA = torch.ops.aten.scaled_dot_product_attention.default


class MaskRewrite(Record):
    """One SDPA call of one example shape's graph: its explicit mask replaced by `is_causal`, or why not."""

    shape: str = Field(description="The example's input shapes, e.g. '4x2048'.")
    node: str = Field(description="The SDPA node's name in the exported graph.")
    replaced: bool
    reason: str = Field("", description="Why the mask was kept, or what was proved when it was replaced.")


def _ancestors(node: fx.Node) -> list[fx.Node]:
    seen: dict[fx.Node, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen[n] = None
        stack.extend(n.all_input_nodes)
    return list(seen)


def _evaluate(gm: fx.GraphModule, mask: fx.Node) -> torch.Tensor | str:
    """The mask's value (computed from constants alone), or why it cannot be computed here."""
    nodes = _ancestors(mask)
    if any(n.op == "placeholder" for n in nodes):
        return "the mask depends on the graph's inputs"
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    sub = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for n in sorted(nodes, key=order.__getitem__):
        env[n] = sub.node_copy(n, lambda a: env[a])
    sub.output(env[mask])
    try:
        with torch.no_grad():
            value = fx.GraphModule(gm, sub)()
    except Exception as e:  # noqa: BLE001 - a mask we cannot compute is kept
        return f"the mask could not be computed: {type(e).__name__}: {e}"
    return value if isinstance(value, torch.Tensor) else "the mask is not a tensor"


def _is_causal(mask: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> str:
    """'' when `mask` is exactly SDPA's own causal mask for these query and key shapes, else why not."""
    B, H, L, _ = q.shape
    S = k.shape[-2]
    if L != S:
        return f"query length {L} differs from key length {S} (is_causal aligns the triangle top-left)"
    try:
        full = mask.expand(B, H, L, S)
    except RuntimeError:
        return f"the mask's shape {tuple(mask.shape)} does not broadcast to [{B}, {H}, {L}, {S}]"
    tril = torch.ones(L, S, dtype=torch.bool, device=mask.device).tril()
    if mask.dtype == torch.bool:
        return "" if bool(torch.equal(full, tril.expand(B, H, L, S))) else "the boolean mask is not the causal triangle"
    if mask.is_floating_point():
        allowed = full[..., tril]
        blocked = full[..., ~tril]
        lowest = torch.finfo(mask.dtype).min
        if bool((allowed == 0).all()) and bool(((blocked == float("-inf")) | (blocked == lowest)).all()):
            return ""
        return "the additive mask is not 0 on the causal triangle and -inf (or the lowest value) above it"
    return f"a {mask.dtype} mask"


def causal_sdpa(gm: fx.GraphModule, shape: str) -> list[MaskRewrite]:
    """Give every SDPA call of `gm` whose explicit mask is provably the causal one `is_causal=True` instead (in
    place; the caller eliminates dead code and recompiles). One record per SDPA call that had a mask."""
    out = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not SDPA:
            continue
        q, k, v, mask, dropout, causal = (list(node.args) + [None, None, None, None, 0.0, False][len(node.args):])[:6]
        mask = node.kwargs.get("attn_mask", mask)
        dropout = node.kwargs.get("dropout_p", dropout)
        causal = node.kwargs.get("is_causal", causal)
        if not isinstance(mask, fx.Node) or causal:
            continue
        why = "dropout is not 0" if dropout else ""
        qv, kv = q.meta.get("val"), k.meta.get("val")
        if not why and not (isinstance(qv, torch.Tensor) and isinstance(kv, torch.Tensor) and qv.dim() == 4):
            why = "the query and key shapes are not recorded in the graph"
        if not why:
            value = _evaluate(gm, mask)
            why = value if isinstance(value, str) else _is_causal(value, qv, kv)
        if why:
            out.append(MaskRewrite(shape=shape, node=node.name, replaced=False, reason=why))
            continue
        kwargs = {key: val for key, val in node.kwargs.items() if key not in ("attn_mask", "dropout_p", "is_causal")}
        node.args = (q, k, v, None, 0.0, True)
        node.kwargs = kwargs
        out.append(MaskRewrite(shape=shape, node=node.name, replaced=True,
                               reason=f"the mask, computed from constants, equals the causal triangle "
                                      f"[{qv.shape[2]}, {kv.shape[2]}] broadcast over batch and heads"))
    return out

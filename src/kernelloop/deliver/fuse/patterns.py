"""The pattern families: each matcher walks the ATen graph and returns the node sets it would fuse.

A value inside a match may be fused away only when every consumer of it (views looked through) is inside the
match; a link from one unit to the next (GEMM -> activation -> gating mul) needs the producer's consumers to be
that next unit only. Matchers run in order (`MATCHERS`) and a compute node claimed by one is not offered to the
later ones: gating before epilogues, rotary, softmax, residual add + norm, GEMM epilogues, then the generic
elementwise chains.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.fx as fx

from . import graph as G


@dataclass
class Match:
    family: str
    nodes: list[fx.Node]


class Ctx:
    """The graph with its order, parameter names, activation/norm module regions and the claimed nodes."""

    def __init__(self, g: fx.Graph):
        self.graph = g
        self.nodes = [n for n in g.nodes if n.op == "call_function"]
        self.order = {n: i for i, n in enumerate(g.nodes)}
        self.params = G.param_names(g)
        self.claimed: set[fx.Node] = set()
        self.regions: dict[tuple[str, str], list[fx.Node]] = {}
        for n in self.nodes:
            for kind, classes in (("act", G.ACT_CLASSES), ("norm", G.NORM_CLASSES)):
                path = G.module_region(n, classes)
                if path is not None and G.target(n) not in G.IGNORED:
                    self.regions.setdefault((kind, path), []).append(n)

    def free(self, nodes) -> bool:
        return not any(n in self.claimed for n in nodes if not G.is_view(n))

    def claim(self, match: Match) -> Match:
        self.claimed.update(match.nodes)
        return match

    def unit(self, n: fx.Node, kind: str) -> list[fx.Node] | None:
        """The activation ('act') or norm ('norm') unit that node n belongs to: its module region's nodes, or
        [n] for a whole ATen op (aten.silu, aten.layer_norm); None when n is neither."""
        classes = G.ACT_CLASSES if kind == "act" else G.NORM_CLASSES
        path = G.module_region(n, classes)
        if path is not None:
            return self.regions[(kind, path)]
        ops = G.ACTIVATION if kind == "act" else G.NORM
        return [n] if G.target(n) in ops else None

    def unit_input(self, unit: list[fx.Node]) -> fx.Node | None:
        """The one non-parameter tensor that feeds the unit from outside (its view chain walked back); None if
        there are several."""
        inside = set(unit)
        srcs = {G.through_views(a) for n in unit for a in G.tensor_inputs(n)} - inside
        srcs = {s for s in srcs if s.name not in self.params and G.through_views(s) not in inside}
        return srcs.pop() if len(srcs) == 1 else None


def views_between(arg, producer: fx.Node) -> list[fx.Node]:
    """The view nodes on the way from an operand back to its producer."""
    out = []
    while isinstance(arg, fx.Node) and arg is not producer and G.is_view(arg):
        out.append(arg)
        arg = arg.args[0]
    return out


def _feeds_only(ctx: Ctx, producer: fx.Node, consumers) -> bool:
    us = G.users(producer)
    return bool(us) and all(u in consumers for u in us)


def gemm_gate(ctx: Ctx) -> list[Match]:
    """act(x W_gate) * (x W_up): two GEMMs on one input, an activation on one, their product (SwiGLU, GeGLU)."""
    out = []
    for m in ctx.nodes:
        if G.target(m) != "aten.mul.Tensor" or len(G.tensor_inputs(m)) != 2:
            continue
        a, b = G.tensor_inputs(m)
        for gate_arg, up_arg in ((a, b), (b, a)):
            act = ctx.unit(G.through_views(gate_arg), "act")
            up = G.through_views(up_arg)
            if act is None or G.target(up) not in G.GEMM:
                continue
            g1 = ctx.unit_input(act)
            if g1 is None or G.target(g1) not in G.GEMM:
                continue
            x1, x2 = G.through_views(g1.args[0]), G.through_views(up.args[0])
            if x1 is not x2 or not _feeds_only(ctx, g1, set(act)) or G.users(up) != [m] \
                    or G.users(act[-1]) != [m]:
                continue
            nodes = [g1, up, m, *act, *views_between(gate_arg, act[-1]), *views_between(up_arg, up)]
            nodes += [v for n in act for a_ in G.tensor_inputs(n) for v in views_between(a_, g1)]
            if ctx.free(nodes):
                out.append(ctx.claim(Match("gemm_gate", nodes)))
                break
    return out


def _rotate_half_base(cat: fx.Node) -> fx.Node | None:
    """x for cat([-x[..., h:], x[..., :h]], -1); None when cat is not that."""
    if G.target(cat) != "aten.cat.default" or not isinstance(cat.args[0], (list, tuple)) or len(cat.args[0]) != 2:
        return None
    neg, lo = cat.args[0]
    if G.target(neg) != "aten.neg.default" or G.target(neg.args[0]) != "aten.slice.Tensor" \
            or G.target(lo) != "aten.slice.Tensor":
        return None
    hi = neg.args[0]
    return hi.args[0] if hi.args[0] is lo.args[0] else None


def rotary(ctx: Ctx) -> list[Match]:
    """x*cos + rotate_half(x)*sin; the chains that share cos and sin in one module (q and k) are one match."""
    groups: dict[tuple, list[fx.Node]] = {}
    for add in ctx.nodes:
        if G.target(add) != "aten.add.Tensor" or len(G.tensor_inputs(add)) != 2:
            continue
        m1, m2 = G.tensor_inputs(add)
        if G.target(m2) == "aten.mul.Tensor" and any(_rotate_half_base(a) is not None for a in G.tensor_inputs(m1)):
            m1, m2 = m2, m1
        if G.target(m1) != "aten.mul.Tensor" or G.target(m2) != "aten.mul.Tensor":
            continue
        cat = next((a for a in G.tensor_inputs(m2) if _rotate_half_base(a) is not None), None)
        if cat is None:
            continue
        x = _rotate_half_base(cat)
        if x not in G.tensor_inputs(m1):
            continue
        cos = next((a for a in G.tensor_inputs(m1) if a is not x), None)
        sin = next((a for a in G.tensor_inputs(m2) if a is not cat), None)
        neg, lo = cat.args[0]
        nodes = [m1, m2, add, cat, neg, neg.args[0], lo]
        if cos is None or sin is None or G.users(m1) != [add] or G.users(m2) != [add] or G.users(cat) != [m2] \
                or G.users(neg) != [cat] or not ctx.free(nodes):
            continue
        key = (G.through_views(cos), G.through_views(sin), G.module_of(add)[0])
        groups.setdefault(key, []).extend(nodes)
    return [ctx.claim(Match("rotary", nodes)) for nodes in groups.values()]


def scale_mask_softmax(ctx: Ctx) -> list[Match]:
    """softmax(x * scale + mask) (mul/div/add/sub before it, single consumers) and the cast after it."""
    out = []
    for s in ctx.nodes:
        if G.target(s) not in G.SOFTMAX or s in ctx.claimed:
            continue
        chain, p = [], s.args[0]
        while isinstance(p, fx.Node) and len(chain) < 3 and p not in ctx.claimed \
                and G.users(p) == [chain[-1] if chain else s] \
                and G.target(p).rsplit(".", 1)[0] in ("aten.add", "aten.mul", "aten.div", "aten.sub"):
            chain.append(p)
            p = p.args[0]
        if not chain:
            continue
        nodes = [*chain, s]
        us = G.users(s)
        if len(us) == 1 and G.target(us[0]) in ("aten.to.dtype", "aten._to_copy.default") and us[0] not in ctx.claimed:
            nodes.append(us[0])
        out.append(ctx.claim(Match("scale_mask_softmax", nodes)))
    return out


def residual_add_norm(ctx: Ctx) -> list[Match]:
    """add(a, b) feeding a norm (LayerNorm/RMSNorm, whole or decomposed); the sum may also be used later (the
    fused kernel then returns both)."""
    out, seen = [], set()
    for n in ctx.nodes:
        unit = ctx.unit(n, "norm")
        if unit is None or id(unit) in seen:
            continue
        seen.add(id(unit))
        x = ctx.unit_input(unit)
        if x is None or G.target(x) != "aten.add.Tensor" or len(G.tensor_inputs(x)) != 2:
            continue
        inside = set(unit)
        if not any(u in inside for u in G.users(x)):
            continue
        views = [v for m in unit for a in G.tensor_inputs(m) for v in views_between(a, x)]
        nodes = [x, *views, *unit]
        if ctx.free(nodes):
            out.append(ctx.claim(Match("residual_add_norm", nodes)))
    return out


def gemm_epilogue(ctx: Ctx) -> list[Match]:
    """A GEMM (its bias inside aten.linear/addmm) and the single-consumer elementwise/activation ops after it."""
    out = []
    for g in ctx.nodes:
        if G.target(g) not in G.GEMM or g in ctx.claimed:
            continue
        nodes, cur = [g], g
        while True:
            us = G.users(cur)
            if not us or any(u in ctx.claimed or u in nodes for u in us):
                break
            act = ctx.unit(us[0], "act")
            if act is not None and all(u in act for u in us) and ctx.unit_input(act) is cur and ctx.free(act):
                nodes += [*act, *(v for m in act for a in G.tensor_inputs(m) for v in views_between(a, cur))]
                cur = act[-1]
            elif len(us) == 1 and G.target(us[0]) in G.ELEMENTWISE:
                nodes += [us[0], *(v for a in G.tensor_inputs(us[0]) for v in views_between(a, cur))]
                cur = us[0]
            else:
                break
        if len(nodes) > 1:
            out.append(ctx.claim(Match("gemm_epilogue", nodes)))
    return out


def elementwise(ctx: Ctx) -> list[Match]:
    """Generic fallback: maximal single-consumer chains (2+ ops) of unclaimed elementwise ops that start at a
    GEMM's or norm's output or end in a GEMM or norm."""
    def ew(n):   # a free elementwise op outside norm/activation modules (those are units of their own)
        return G.target(n) in G.ELEMENTWISE and n not in ctx.claimed and ctx.unit(n, "norm") is None \
            and G.module_region(n, G.ACT_CLASSES) is None

    def anchor(n):
        return G.target(n) in G.GEMM or ctx.unit(n, "norm") is not None

    out = []
    for n in ctx.nodes:
        preds = [G.through_views(a) for a in G.tensor_inputs(n)]
        if not ew(n) or any(ew(p) and G.users(p) == [n] for p in preds):
            continue
        chain = [n]
        while len(G.users(chain[-1])) == 1 and ew(G.users(chain[-1])[0]):
            chain.append(G.users(chain[-1])[0])
        tail = G.users(chain[-1])
        if len(chain) >= 2 and (any(anchor(p) for p in preds) or (len(tail) == 1 and anchor(tail[0]))):
            out.append(ctx.claim(Match("elementwise", chain)))
    return out


MATCHERS = (gemm_gate, rotary, scale_mask_softmax, residual_add_norm, gemm_epilogue, elementwise)


def find(g: fx.Graph) -> list[Match]:
    """Every match of every family, matchers in MATCHERS order; nodes in graph order."""
    ctx = Ctx(g)
    matches = [m for matcher in MATCHERS for m in matcher(ctx)]
    for m in matches:
        m.nodes = sorted(set(m.nodes), key=ctx.order.__getitem__)
    return matches

"""A match made canonical: steps with symbolic shapes, the symbol bindings, and the bytes the fusion saves.

Symbols: every distinct size above 1, in order of first appearance (the subgraph's inputs first, then each
step's output), is s0, s1, ...; sizes of 1 stay '1' (they decide broadcasting). Equal sizes share a
symbol, so equalities are implicit (and coincidences of the example sizes, e.g. batch 2 and 2 KV heads, show as
one symbol); constraints add a reshape's products (s1 == s3*s4) and alignment (s2 % 16 == 0). Integers inside list arguments
(view shapes) that equal a bound size are written as its symbol. Bytes: a value whose every consumer is in the
match is neither written nor read back (2 x its bytes); one that also leaves the match is still written, but
not read back by the match's own consumers (1 x its bytes); views move nothing (0).
"""

from __future__ import annotations

import torch
import torch.fx as fx

from . import graph as G
from .patterns import Match
from .records import Occurrence, Signature, Step

ALIGN = 16


def _dtype(node) -> str:
    v = G.val(node)
    return str(v.dtype).removeprefix("torch.") if v is not None else "none"


def _const(a, sym: dict[int, str]) -> str:
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(sym.get(x, str(x)) if isinstance(x, int) and not isinstance(x, bool)
                               else _const(x, sym) for x in a) + "]"
    if isinstance(a, torch.dtype):
        return str(a).removeprefix("torch.")
    return repr(a) if isinstance(a, str) else str(a)


RESHAPES = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default"}


def _merges(a: list[str], b: list[str], bind: dict[str, int]) -> set[str]:
    """'x == y*z' for each dim x of b that is the product of two adjacent dims y, z of a (a reshape merged them)."""
    out = set()
    for x in b:
        for y, z in zip(a, a[1:]):
            if x in bind and y in bind and z in bind and x not in a and bind[y] * bind[z] == bind[x]:
                out.add(f"{x} == {y}*{z}")
    return out


def canonical(match: Match, params: set[str]) -> tuple[Signature, Occurrence, set[str]]:
    """The match's signature, its occurrence record, and the shape relations its reshapes imply."""
    nodes = match.nodes
    inside = set(nodes)
    index = {n: k for k, n in enumerate(nodes)}
    inputs: list[fx.Node] = []
    for n in nodes:
        for a in G.tensor_inputs(n):
            if a not in inside and a not in inputs:
                inputs.append(a)
    sym: dict[int, str] = {}

    def shape(node) -> list[str]:
        v = G.val(node)
        dims = [] if v is None else [int(d) for d in v.shape]
        for d in dims:
            if d > 1 and d not in sym:
                sym[d] = f"s{len(sym)}"
        return [sym.get(d, str(d)) for d in dims]

    in_shapes = [shape(a) for a in inputs]
    names = {a: ("p" if a.name in params else "in") + str(k) for k, a in enumerate(inputs)}
    steps = []
    for n in nodes:
        out_shape = shape(n)
        operands = [f"%{index[a]}" if a in inside else names[a] for a in G.tensor_inputs(n)]
        consts = [_const(a, sym) for a in list(n.args) + list(n.kwargs.values())
                  if not isinstance(a, fx.Node) and not (isinstance(a, (list, tuple)) and a
                                                        and all(isinstance(x, fx.Node) for x in a))]
        steps.append(Step(op=G.target(n), operands=operands, consts=consts, shape=out_shape, dtype=_dtype(n)))
    outputs, saved = [], {}
    for n in nodes:
        us = G.users(n)
        leaves = any(u not in inside for u in us) or any(u.op == "output" for u in n.users)
        if leaves and not G.is_view(n):
            outputs.append(f"%{index[n]}")
        if G.is_view(n) or not us:
            continue
        if not leaves:
            saved[n.name] = 2 * G.nbytes(n)
        elif any(u in inside for u in us):
            saved[n.name] = G.nbytes(n)
    bind = {s: d for d, s in sym.items()}
    shapes = {**{names[a]: sh for a, sh in zip(inputs, in_shapes)}, **{f"%{k}": st.shape for k, st in enumerate(steps)}}
    rels = set()
    for st in steps:
        if st.op in RESHAPES and st.operands:
            src = shapes[st.operands[0]]
            rels |= _merges(src, st.shape, bind) | _merges(st.shape, src, bind)
    sig = Signature(family=match.family, steps=steps, inputs=in_shapes, outputs=outputs,
                    symbols=list(sym.values()))
    paths = list(dict.fromkeys(G.module_of(n)[0] for n in nodes if not G.is_view(n)))
    occ = Occurrence(nodes=[n.name for n in nodes], module_paths=paths, bindings={s: d for d, s in sym.items()},
                     saved_bytes=sum(saved.values()), intermediates=saved)
    return sig, occ, rels


def alignment(bindings: dict[str, int]) -> set[str]:
    """'s % 16 == 0' for each symbol divisible by ALIGN (what vectorised loads and tiles care about)."""
    return {f"{s} % {ALIGN} == 0" for s, v in bindings.items() if v % ALIGN == 0}

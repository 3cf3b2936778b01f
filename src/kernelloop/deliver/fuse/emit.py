"""A fusion's reference, written from the model's own graph: the exact ATen calls the model ran, as Python source.

    source = reference_source(nodes, inputs, outputs, scalars={("add_7", 1): "eps"}, model_dtype=torch.bfloat16)

Each node of the subgraph becomes one line `vK = torch.ops.aten.<op>.<overload>(...)` with the node's own
arguments: constants as the graph holds them (the norm's eps, GELU's 0.044715, `dim=[-1]`), except those named in
`scalars`, which become the op's scalar arguments (so one pattern serves several eps values, each verified). The
op's inputs may reach the subgraph through views the op's interface leaves out (rotary embedding takes q as
[B, S, H, D] while the model's subgraph reads q.transpose(1, 2)): `Port.views` are re-applied first, and each
output's `views` before it is returned. Integers that are sizes of the example are written as sizes of the
tensors at hand (a slice at half the head dimension, a layer_norm's normalized_shape), so the reference runs on
any shape of the op's axes; views inside a row-wise subgraph that only regroup leading dimensions are dropped
(`flatten_rows`), since the op takes the rows flattened.

Casts: a bf16 model's subgraph casts to float32 and back. Called on inputs in the model's dtype (the eager and
torch.compile baselines) every cast runs as the model ran it; called on wider inputs (the verifier's float64
truth) floating casts keep the wide dtype, so the truth is the same computation without intermediate rounding.
Device arguments are dropped (the graph was exported on one device; the op runs on its inputs' device).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import graph as G

CASTS = {"aten.to.dtype", "aten._to_copy.default", "aten.to.dtype_layout"}
DROPPED_KWARGS = {"device", "pin_memory", "non_blocking"}
BIG = 2 ** 63 - 1   # aten.slice's "to the end"


class EmitError(ValueError):
    """The subgraph cannot be written as a reference for the op's interface (the reason says why)."""


@dataclass(frozen=True)
class Port:
    """One op argument or result: its name and the graph value it stands for.

    For an input, `views` are (target, args) pairs applied to the op's tensor, in order, to give the subgraph's
    input (`node`); for an output, applied to the subgraph's value (`node`) to give the op's result."""

    name: str
    node: fx.Node
    views: tuple[tuple[str, tuple], ...] = ()


@dataclass
class _Writer:
    names: dict[fx.Node, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def _py(v, w: _Writer, sizes=None) -> str:
    """A constant or node argument as Python source."""
    if isinstance(v, fx.Node):
        if v not in w.names:
            raise EmitError(f"node {v.name} is used but is neither an input of the op nor computed before")
        return w.names[v]
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return sizes(v) if sizes is not None else repr(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_py(x, w, sizes) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, torch.dtype):
        return f"torch.{str(v).removeprefix('torch.')}"
    if isinstance(v, torch.layout):
        return f"torch.{str(v).removeprefix('torch.')}"
    if isinstance(v, torch.memory_format):
        return f"torch.{str(v).removeprefix('torch.')}"
    raise EmitError(f"no source form for a constant of type {type(v).__name__}")


def _call(target: str) -> str:
    """'aten.add.Tensor' -> 'torch.ops.aten.add.Tensor'."""
    if not target.startswith("aten."):
        raise EmitError(f"{target}: only ATen operators are written into a reference")
    return "torch.ops." + target


def _size_of(value: int, operand, w: _Writer, dim: int | None = None) -> str:
    """An integer of a slice or a normalized_shape written as a size of the operand when it is one (or half of
    one: rotate_half's split): of dimension `dim` when given, else of the last dimension that matches."""
    v = G.val(operand) if isinstance(operand, fx.Node) else None
    if v is None or value in (0, -1, BIG):
        return repr(value)
    name = w.names[operand]
    dims = [int(d) for d in v.shape]
    order = [dim % len(dims)] if dim is not None else list(reversed(range(len(dims))))
    for d in order:
        if dims[d] == value:
            return f"{name}.shape[{d - len(dims)}]"
    for d in order:
        if dims[d] == 2 * value:
            return f"({name}.shape[{d - len(dims)}] // 2)"
    return repr(value)


def _node_line(n: fx.Node, w: _Writer, var: str, scalars: dict[tuple[str, int | str], str], flatten_rows: bool) -> str:
    t = G.target(n)
    if t == "getitem":
        return f"{var} = {_py(n.args[0], w)}[{n.args[1]!r}]"
    if G.is_view(n) and flatten_rows and t != "aten.slice.Tensor" and t != "aten.dropout.default":
        src, out = G.val(n.args[0]), G.val(n)
        if src is None or out is None or src.dim() == 0 or out.dim() == 0 or src.shape[-1] != out.shape[-1] \
                or t in ("aten.transpose.int", "aten.permute.default", "aten.t.default"):
            raise EmitError(f"{n.name} ({t}) changes more than the leading dimensions: the op cannot take the rows "
                            f"flattened")
        return f"{var} = {_py(n.args[0], w)}"
    args, kwargs = list(n.args), dict(n.kwargs)
    first = next((a for a in args if isinstance(a, fx.Node)), None)
    parts = []
    for i, a in enumerate(args):
        if (n.name, i) in scalars:
            parts.append(scalars[(n.name, i)])
        elif t == "aten.slice.Tensor" and i >= 2 and isinstance(a, int):
            parts.append(_size_of(a, args[0], w, args[1] if isinstance(args[1], int) else None))
        elif t in ("aten.layer_norm.default", "aten.rms_norm.default") and i == 1 and isinstance(a, (list, tuple)):
            parts.append("[" + ", ".join(_size_of(x, args[0], w, d - len(a)) for d, x in enumerate(a)) + "]")
        else:
            parts.append(_py(a, w))
    for k, a in kwargs.items():
        if k in DROPPED_KWARGS:
            continue
        parts.append(f"{k}={scalars[(n.name, k)] if (n.name, k) in scalars else _py(a, w)}")
    if t in CASTS:
        dtype = n.kwargs.get("dtype", args[1] if len(args) > 1 and isinstance(args[1], torch.dtype) else None)
        if not isinstance(dtype, torch.dtype) or first is None:
            raise EmitError(f"{n.name}: a cast without a dtype")
        return f"{var} = _cast({w.names[first]}, {_py(dtype, w)}, wide)"
    if t == "aten.type_as.default":
        return f"{var} = _cast({_py(args[0], w)}, {_py(args[1], w)}.dtype, wide)"
    return f"{var} = {_call(t)}({', '.join(parts)})"


def _apply_views(name: str, views, w: _Writer) -> list[str]:
    out = []
    for target, args in views:
        out.append(f"{name} = {_call(target)}({name}{''.join(', ' + _py(a, w) for a in args)})")
    return out


HELPERS = '''
MODEL_DTYPE = {dtype}


def _wide(*tensors):
    """The truth's dtype when called on inputs wider than the model's (the verifier's float64), else None."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.dtype if t.element_size() > MODEL_DTYPE.itemsize else None
    return None


def _cast(x, dtype, wide):
    """The model's cast; in the wide truth a floating cast keeps the wide dtype (no intermediate rounding)."""
    if wide is not None and dtype.is_floating_point:
        return x.to(wide)
    return x.to(dtype)
'''


def reference_source(nodes: list[fx.Node], inputs: list[Port], outputs: list[Port], *,
                     scalars: dict[tuple[str, int | str], str] | None = None, scalar_names: list[str] = (),
                     model_dtype: torch.dtype, flatten_rows: bool = False, doc: str = "") -> str:
    """The reference module's source: `reference(*inputs, *scalars)` computing the subgraph `nodes` (in graph
    order) from `inputs` and returning `outputs` (one tensor, or a tuple)."""
    scalars = scalars or {}
    inside = set(nodes)
    w = _Writer()
    for p in inputs:
        w.names[p.node] = p.name
    body: list[str] = []
    for p in inputs:
        body += _apply_views(p.name, p.views, w)
    for k, n in enumerate(nodes):
        if n in w.names:
            continue
        for a in G.tensor_inputs(n):
            if a not in inside and a not in w.names:
                raise EmitError(f"{n.name} reads {a.name}, which is neither inside the subgraph nor an op input")
        var = f"v{k}"
        body.append(_node_line(n, w, var, scalars, flatten_rows))
        w.names[n] = var
    rets = []
    for p in outputs:
        if p.node not in w.names:
            raise EmitError(f"output {p.name} ({p.node.name}) is not computed by the subgraph")
        body.append(f"{p.name} = {w.names[p.node]}")
        body += _apply_views(p.name, p.views, w)
        rets.append(p.name)
    args = [p.name for p in inputs] + list(scalar_names)
    header = f'"""{doc}"""\n\n' if doc else ""
    lines = [header + "import torch\n", HELPERS.format(dtype=_py(model_dtype, w)), "",
             f"def reference({', '.join(args)}):",
             f"    wide = _wide({', '.join(p.name for p in inputs)})"]
    lines += [f"    {line}" for line in body]
    lines.append(f"    return {rets[0]}" if len(rets) == 1 else f"    return ({', '.join(rets)})")
    return "\n".join(lines) + "\n"



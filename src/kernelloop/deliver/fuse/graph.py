"""The model's ATen graph and what discovery asks of its nodes.

`export_graph` runs torch.export.export(strict=False) on the example inputs and keeps the graph as exported
(the ATen ops torch.export emits: aten.linear, aten.addmm, aten.layer_norm stay whole; modules written in
Python, such as transformers' LlamaRMSNorm, reach it decomposed and are recognised by their module class).
Views (view, reshape, transpose, slice, ...), eval-mode dropout and metadata asserts move no data: discovery
looks through them when it counts a value's consumers and does not charge them bytes.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

GEMM = {"aten.linear.default", "aten.mm.default", "aten.addmm.default", "aten.matmul.default", "aten.bmm.default",
        "aten.baddbmm.default"}
NORM = {"aten.layer_norm.default", "aten.rms_norm.default", "aten.native_layer_norm.default"}
ACTIVATION = {"aten.silu.default", "aten.gelu.default", "aten.relu.default", "aten.tanh.default",
              "aten.sigmoid.default", "aten.gelu_.default", "aten.silu_.default", "aten.relu_.default"}
SOFTMAX = {"aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default"}
ELEMENTWISE = ACTIVATION | {
    f"aten.{op}.{ov}" for op in ("add", "sub", "mul", "div", "pow", "where", "maximum", "minimum")
    for ov in ("Tensor", "Scalar", "Tensor_Scalar", "self", "ScalarOther", "default")} | {
    f"aten.{op}.default" for op in ("neg", "exp", "rsqrt", "sqrt", "reciprocal", "cos", "sin", "erf", "abs")} | {
    "aten.to.dtype", "aten.to.dtype_layout", "aten._to_copy.default", "aten.type_as.default"}
VIEW = {f"aten.{op}" for op in (
    "view.default", "reshape.default", "_unsafe_view.default", "transpose.int", "t.default", "permute.default",
    "unsqueeze.default", "squeeze.dim", "squeeze.default", "expand.default", "slice.Tensor", "select.int",
    "alias.default", "contiguous.default", "flatten.using_ints", "unflatten.int", "split.Tensor", "chunk.default",
    "detach.default")}
IGNORED = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default"}
NORM_CLASSES = ("RMSNorm", "LayerNorm", "GroupNorm")
ACT_CLASSES = ("GELU", "SiLU", "Activation", "ReLU", "Tanh")


class ExportFailed(RuntimeError):
    """torch.export could not capture the model."""


def export_program(model: torch.nn.Module, example_inputs, example_kwargs=None) -> torch.export.ExportedProgram:
    """torch.export.export(strict=False) of the model on the examples; ExportFailed names what went wrong."""
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    try:
        with torch.no_grad():
            return torch.export.export(model, args, kwargs=example_kwargs or None, strict=False)
    except Exception as e:  # noqa: BLE001 - any failure to export is reported, not raised through
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ExportFailed(f"torch.export.export failed: {type(e).__name__}: {first}"[:2000]) from e


def export_graph(model: torch.nn.Module, example_inputs, example_kwargs=None) -> fx.Graph:
    """The exported ATen graph (torch.export.export, strict=False); ExportFailed names what went wrong."""
    return export_program(model, example_inputs, example_kwargs).graph


def target(node: fx.Node) -> str:
    """'aten.mul.Tensor' for an ATen call, 'getitem' for operator.getitem, '' for anything else."""
    if node.op != "call_function":
        return ""
    if node.target is operator.getitem:
        return "getitem"
    return str(node.target)


def is_view(node: fx.Node) -> bool:
    t = target(node)
    if t in VIEW or t == "getitem":
        return True
    if t == "aten.dropout.default":   # eval mode (train=False): the input itself
        train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", True)
        return train is False
    return False


def val(node) -> torch.Tensor | None:
    v = node.meta.get("val") if isinstance(node, fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def nbytes(node: fx.Node) -> int:
    """Bytes of the node's value (numel x element size), 0 for non-tensors."""
    v = val(node)
    return 0 if v is None else int(v.numel()) * v.element_size()


def users(node: fx.Node) -> list[fx.Node]:
    """The data consumers of a node's value, looking through views (asserts left out)."""
    out = []
    for u in node.users:
        if target(u) in IGNORED:
            continue
        out.extend(users(u)) if is_view(u) else out.append(u)
    return out


def through_views(node) -> fx.Node:
    """The producer of an operand: views walked back to the node that computed the data."""
    while isinstance(node, fx.Node) and is_view(node) and node.args and isinstance(node.args[0], fx.Node):
        node = node.args[0]
    return node


def tensor_inputs(node: fx.Node) -> list[fx.Node]:
    """The node's tensor operands (lists flattened), in argument order."""
    out = []

    def walk(a):
        if isinstance(a, fx.Node):
            if val(a) is not None:
                out.append(a)
        elif isinstance(a, (list, tuple)):
            for x in a:
                walk(x)
    for a in list(node.args) + list(node.kwargs.values()):
        walk(a)
    return out


def module_of(node: fx.Node) -> tuple[str, str]:
    """(path, qualified class) of the innermost module around the node; ('', '') when unknown."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, cls = list(stack.values())[-1]
    return path, cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"


def module_region(node: fx.Node, kinds: tuple[str, ...]) -> str | None:
    """The path of the innermost module around the node whose class name contains one of kinds, else None."""
    path, cls = module_of(node)
    name = cls.rsplit(".", 1)[-1]
    return path if path and any(k in name for k in kinds) else None


def is_param(node: fx.Node, graph_params: set[str]) -> bool:
    return node.op == "placeholder" and node.name in graph_params


def param_names(graph: fx.Graph) -> set[str]:
    """Placeholders that are parameters, buffers or constants (torch.export prefixes them p_, b_, c_)."""
    return {n.name for n in graph.nodes if n.op == "placeholder" and n.name[:2] in ("p_", "b_", "c_")}


def step_nodes(g: fx.Graph, names: list[str]) -> list[fx.Node]:
    """The nodes of an occurrence (`Occurrence.nodes`), in its order."""
    by_name = {n.name: n for n in g.nodes}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise KeyError(f"nodes {missing[:5]} are not in the graph")
    return [by_name[n] for n in names]


def operand_nodes(steps: list[fx.Node], params: set[str]) -> dict[str, fx.Node]:
    """The signature's operand names of an occurrence -> nodes: 'in0'/'p1' (the subgraph's inputs, numbered in
    the order fuse.signature numbers them) and '%K' (step K)."""
    inside = set(steps)
    inputs: list[fx.Node] = []
    for n in steps:
        for a in tensor_inputs(n):
            if a not in inside and a not in inputs:
                inputs.append(a)
    out = {("p" if a.name in params else "in") + str(k): a for k, a in enumerate(inputs)}
    out.update({f"%{k}": n for k, n in enumerate(steps)})
    return out

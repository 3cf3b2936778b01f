"""The source of an exported solution: a kernelloop template with its configuration bound behind a FlashInfer
entry point `run`, self-contained (torch and triton only; no kernelloop import).

The entry point takes the Definition's inputs in order (tensors, then the op's scalars) -- and, in destination
passing style, the outputs after them -- reads every axis from the input shapes, allocates what kernelloop's
harness would have allocated (the outputs unless passed; the op's scratch workspace, if it declares one) and
calls the template's `launch(*inputs, *outputs, [scratch=...], **scalars, **config)`.
"""

from __future__ import annotations

import ast
import itertools
import keyword

from ...base.records import Candidate, DType, OpSpec, check_expression, sha256_hex
from .errors import InteropError
from .import_code import top_level_names
from ...base import pyast

_FUNCS = {"min": "min", "max": "max", "cdiv": "cdiv", "sqrt_": "sqrt", "next_pow2": "next_pow2"}  # -> helper names
_TORCH = {DType.fp16: "float16", DType.bf16: "bfloat16", DType.fp32: "float32"}
_PREFIX = "_kl_"


def check_identifier(name: str, field: str) -> str:
    """`name` when it can be a Python parameter of the entry point; InteropError naming `field` otherwise."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise InteropError(field, f"{name!r} is not a Python identifier: it cannot be a parameter of `run`")
    if name.startswith(_PREFIX):
        raise InteropError(field, f"{name!r}: names starting with {_PREFIX!r} are reserved for the generated code")
    return name


def axis_bindings(spec: OpSpec) -> dict[str, tuple[str, int]]:
    """Where each axis is read at run time: (input name, dimension) of its first occurrence among the inputs."""
    out: dict[str, tuple[str, int]] = {}
    for t in spec.inputs:
        for d, ax in enumerate(t.shape):
            out.setdefault(ax, (t.name, d))
    return out


def _axis_var(ax: str) -> str:
    return f"_kl_ax_{ax}" if ax.isidentifier() else f"_kl_ax_{sha256_hex(ax)[:12]}"


class _Rename(ast.NodeTransformer):
    """Axis names -> the entry point's locals; kernelloop's formula functions -> the generated helpers."""

    def __init__(self, axes: set[str], elem: int, prefix: str):
        self.axes, self.elem, self.prefix = axes, elem, prefix

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "elem" and node.id not in self.axes:
            return ast.copy_location(ast.Constant(self.elem), node)
        if node.id in self.axes:
            return ast.copy_location(ast.Name(id=_axis_var(node.id), ctx=node.ctx), node)
        if node.id in _FUNCS:
            f = _FUNCS[node.id]
            return ast.copy_location(ast.Name(id=f if f in ("min", "max") else self.prefix + f, ctx=node.ctx), node)
        return node


def _expression(expr: str, spec: OpSpec, dtype: DType, field: str, prefix: str) -> str:
    tree = check_expression(expr)
    unknown = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(spec.axes) - set(_FUNCS) - {"elem"}
    if unknown:
        raise InteropError(field, f"{expr!r} uses {sorted(unknown)}, which the entry point cannot know")
    return ast.unparse(_Rename(set(spec.axes), dtype.itemsize, prefix).visit(tree).body)


def _fresh(base: str, taken: set[str], clashes) -> str:
    """`base`, or `base` numbered 2, 3, ... -- the first that `clashes` finds nowhere among `taken`."""
    for k in itertools.count(1):
        name = base.format("" if k == 1 else k)
        if not any(clashes(name, t) for t in taken):
            return name
    raise AssertionError("unreachable")


def solution_source(candidate: Candidate, spec: OpSpec, dtype: DType, *, destination_passing_style: bool,
                    definition_name: str) -> tuple[str, str]:
    """The solution file and the name of its entry point: a comment header, the candidate's source verbatim, then
    the generated entry point -- `run` and `_kl_` helpers, or numbered names (`run2`, `_kl2_`) where the source
    already has those names (a solution imported from FlashInfer-Trace and exported again)."""
    tensors = [check_identifier(t.name, f"inputs.{t.name}") for t in spec.inputs]
    scalars = [check_identifier(s, f"scalars.{s}") for s in spec.scalars]
    outs = [check_identifier(t.name, f"outputs.{t.name}") for t in spec.outputs]
    names = tensors + scalars + outs
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InteropError("inputs", f"names {dup} are used twice among inputs, scalars and outputs")
    tree = pyast.parse(candidate.source)
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if "launch" not in defined:
        raise InteropError("candidate.source", "defines no top-level `launch`")
    taken = top_level_names(tree) | set(names)
    entry_name = _fresh("run{}", taken, str.__eq__)
    g = _fresh("_kl{}_", taken, lambda prefix, name: name.lower().startswith(prefix))  # the helpers' prefix
    config = g.upper() + "CONFIG"
    body, out_args = _entry_body(spec, dtype, tensors, scalars, g, config, destination_passing_style)
    params = tensors + scalars + (out_args if destination_passing_style else [])
    style = "destination passing: outputs are its last arguments" if destination_passing_style else \
        "value-returning: it allocates and returns the outputs"
    header = (f"# FlashInfer-Trace solution for `{definition_name}`, exported by kernelloop.\n"
              f"# kernelloop candidate {candidate.id}: template `{candidate.template}` of op `{candidate.op}`, "
              f"proposer `{candidate.proposer}`,\n# configuration {candidate.config!r}.\n"
              f"# Entry point `{entry_name}` ({style}); the candidate's source follows verbatim, then the entry point.\n\n")
    entry = f'''

# ---- FlashInfer-Trace entry point (generated by kernelloop) -----------------------------------------------
import torch as {g}torch  # noqa: E402

{g}launch = launch
{config} = {candidate.config!r}


def {g}cdiv(a, b):
    return -(-a // b)


def {g}next_pow2(n):
    return 1 << max(0, int(n - 1).bit_length())


def {g}sqrt(x):
    return x ** 0.5


def {entry_name}({", ".join(params)}):
    """{spec.name} ({dtype.value}) with `{candidate.template}` at {candidate.config!r}."""
''' + "".join(f"    {line}\n" for line in body)
    return header + candidate.source.rstrip("\n") + "\n" + entry, entry_name


def _axis_lines(spec: OpSpec, destination_passing_style: bool) -> list[str]:
    """The entry point's lines that size the axes it needs (the outputs' it allocates, the scratch's): from an
    input's shape, or a fixed axis's value."""
    bound = axis_bindings(spec)
    needed = set() if destination_passing_style else {ax for t in spec.outputs for ax in t.shape}
    if spec.scratch is not None:
        names = {n.id for n in ast.walk(check_expression(spec.scratch.numel)) if isinstance(n, ast.Name)}
        needed |= names & set(spec.axes)
    body = []
    for ax in spec.axes:
        if ax not in needed:
            continue
        if ax in bound:
            name, dim = bound[ax]
            body.append(f"{_axis_var(ax)} = {name}.shape[{dim}]")
        else:
            a = spec.axes[ax]
            if a.max is not None and a.min == a.max:
                body.append(f"{_axis_var(ax)} = {a.min}")
            else:
                raise InteropError(f"axes.{ax}", "appears in no input's shape: the entry point cannot size the "
                                                 "tensors that use it")
    return body


def _entry_body(spec: OpSpec, dtype: DType, tensors: list[str], scalars: list[str], g: str, config: str,
                destination_passing_style: bool) -> tuple[list[str], list[str]]:
    """The entry point's body (axes sized, outputs and scratch allocated, the launch, the return) and the names
    of its outputs."""
    body = _axis_lines(spec, destination_passing_style)
    out_args = []
    for t in spec.outputs:
        shape = ", ".join(_axis_var(ax) for ax in t.shape) + ("," if len(t.shape) == 1 else "")
        tdt = _TORCH[spec.tensor_dtype(t, dtype)]
        if not destination_passing_style:
            body.append(f"{t.name} = {g}torch.empty(({shape}), dtype={g}torch.{tdt}, device={tensors[0]}.device)")
        out_args.append(t.name)
    extra = ""
    if spec.scratch is not None:
        numel = _expression(spec.scratch.numel, spec, dtype, "scratch.numel", g)
        sdt = _TORCH[DType(spec.scratch.dtype)]
        dev = f"{tensors[0]}.device"
        body.append(f"_kl_scratch = {g}torch.empty((int({numel}),), dtype={g}torch.{sdt}, device={dev})")
        extra = ", scratch=_kl_scratch"
    kw = "".join(f", {s}={s}" for s in scalars)
    body.append(f"{g}launch({', '.join(tensors + out_args)}{extra}{kw}, **{config})")
    if not destination_passing_style:
        body.append(f"return {', '.join(out_args)}")
    return body, out_args

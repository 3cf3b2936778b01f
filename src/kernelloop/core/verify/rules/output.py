"""What the output is: the harness's buffer (`output-aliasing`), computed at the precision of the dtypes in play
(`precision-downcast`).
"""

from __future__ import annotations

import ast

from ....base.records import DType
from .registry import ALIAS, PREC, rule
from .source import _Module, _chain_root
from .tables import _ALIAS_ATTRS, _ALIAS_METHODS, _FUNCS, _TF32_PRECISIONS


@rule(ALIAS, """The output must be the buffer the harness allocated, filled by the kernel. Rebinding its storage
    (set_, resize_, .data =), changing its class, or subclassing torch.Tensor with __torch_function__ or
    __torch_dispatch__ makes the result aliased or lazy: it is computed when the harness reads it, outside the
    timed call, or it is simply another tensor's memory.""")
def _output_aliasing(m: _Module):
    yield from m.hits_for(ALIAS)
    for n in m.nodes:
        if isinstance(n, ast.ClassDef):
            for b in n.bases:
                if m.resolve(b) in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"):
                    yield n, f"class {n.name} subclasses torch.Tensor"
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in ("__torch_function__",
                                                                                   "__torch_dispatch__"):
            yield n, f"defines {n.name}"
    for node, _recv, attr in m.host_attrs():
        if attr in _ALIAS_METHODS:
            yield node, f".{attr}"
    for _stmt, t in m.store_targets():
        if not isinstance(t, ast.Attribute):
            continue
        root = _chain_root(t)
        if root is None or m.resolve(root) is not None:
            continue  # stores into modules are monkey-patching
        dunder = t.attr.startswith("__") and t.attr.endswith("__")
        if dunder or (t.attr in _ALIAS_ATTRS and m.is_tensor(t.value, m.visible(m.scope[t]))):
            yield t, f"assigns .{t.attr}"


@rule(PREC, """Computing below the precision of the op's dtype (casts to fp16/bf16/fp8 when the op runs in a
    wider type, TF32 matmuls for fp32) buys speed with accuracy the spec did not give away; with loose tolerances
    or benign inputs it can pass the checks and then be wrong on real data.""")
def _precision_downcast(m: _Module):
    yield from m.hits_for(PREC)
    fp32 = DType.fp32 in m.dtypes
    for n in m.nodes:
        if isinstance(n, _FUNCS) and n in m.jit:
            for d in [*n.args.defaults, *(d for d in n.args.kw_defaults if d)]:
                q = m.narrow(d)
                if q:
                    yield d, f"kernel parameter defaults to {q}"
        if not isinstance(n, ast.Call):
            continue
        rm = m.receiver_method(n)
        meth = rm[1] if rm and m.resolve(n.func) is None else None
        kws = {k.arg: k.value for k in n.keywords if k.arg}
        candidates: list[ast.AST] = [kws[k] for k in ("dtype", "out_dtype") if k in kws]
        if meth in ("to", "type"):
            candidates += n.args[:1]
        if m.resolve(n.func) in ("triton.language.cast", "triton.language.core.cast"):
            candidates += n.args[1:2]
        if isinstance(n.func, ast.Subscript):  # a kernel launch k[grid](...)
            candidates += [*n.args, *kws.values()]
        for c in candidates:
            q = m.narrow(c)
            if q:
                yield n, f"casts to {q}"
                break
        else:
            if meth in ("half", "bfloat16") and not m.in_jit(n) and \
                    m.below("fp16" if meth == "half" else "bf16"):
                yield n, f".{meth}()"
            elif fp32 and (isinstance(kws.get("allow_tf32"), ast.Constant) and kws["allow_tf32"].value is True
                           or isinstance(kws.get("input_precision"), ast.Constant)
                           and kws["input_precision"].value in _TF32_PRECISIONS):
                yield n, "reduced-precision (TF32/bf16) dot for an fp32 op"

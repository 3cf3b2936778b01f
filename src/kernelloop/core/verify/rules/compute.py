"""Where the result comes from: it must be computed by the candidate's own kernel.

The library implementation of the op (`library-op`), torch compute on the host or in a kernel body
(`torch-on-hot-path`), and a try/except that turns a failing kernel into a silent fallback (`try-except`).
"""

from __future__ import annotations

import ast

from .registry import HOT, LIB, TRY, rule
from .source import _Module
from .tables import _AMBIGUOUS, _COMPUTE_BUILTINS, _META_ATTRS, _META_METHODS, _TENSOR_METHODS, _VIEW_METHODS


@rule(LIB, """The candidate calls the library implementation of the op it is meant to replace (torch's
    layer_norm/rms_norm/softmax under any alias, torch.compile, Liger-Kernel, apex, ...). It would pass
    verification by being the baseline and then claim the baseline's speed, or a faster library's, as its own.""")
def _library_op(m: _Module):
    yield from m.hits_for(LIB)
    for node, _recv, attr in m.host_attrs():
        if attr in m.library_names:
            yield node, f".{attr}"


@rule(TRY, """A try/except around the kernel turns its failures into a silent fallback (usually the library op),
    so the verifier never sees the kernel fail and the timer may time the fallback. A kernel that fails must
    fail visibly.""")
def _try_except(m: _Module):
    for n in m.nodes:
        if isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try))) and n.handlers:
            h = n.handlers[0]
            yield h, "except " + (ast.unparse(h.type) if h.type is not None else "(bare)")


@rule(HOT, """The candidate must be a kernel. Host code may use torch only for metadata (shape, stride, numel,
    dtype, device, data_ptr) and allocation-free views; torch compute, allocation, copies, casts or tensor
    arithmetic there (or in a kernel body) means the result comes from torch, not from the kernel being judged,
    and scratch allocations can pick up freed memory that still holds an answer.""")
def _torch_on_hot_path(m: _Module):
    yield from m.hits_for(HOT)
    for node, recv, attr in m.host_attrs():
        if attr not in _TENSOR_METHODS or attr in _META_METHODS or attr in _VIEW_METHODS or attr in _META_ATTRS \
                or (attr.startswith("is_") and attr not in _AMBIGUOUS):
            continue
        call = m.parent.get(node)
        if attr == "type" and not (isinstance(call, ast.Call) and call.func is node and (call.args or call.keywords)):
            continue  # x.type() names the type; x.type(T) converts
        if attr not in _AMBIGUOUS or m.is_tensor(recv, m.visible(m.scope[node])):
            yield node, f".{attr}"
    jit_names = {f.name for f in m.jit if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for n in m.nodes:  # a kernel body run as plain Python on the host (`k(x, y)`, `k.fn(x, y)`) is no kernel
        if not (isinstance(n, ast.Name) and n.id in jit_names and isinstance(n.ctx, ast.Load)) or m.in_jit(n):
            continue
        p = m.parent.get(n)
        if isinstance(p, ast.Call) and p.func is n:
            yield n, f"calls the kernel {n.id} directly, not through a launch grid"
        elif isinstance(p, ast.Attribute) and p.attr in ("fn", "__wrapped__", "__call__", "__code__"):
            yield n, f"{n.id}.{p.attr}: the kernel's Python body"
    for call in m.host_calls():
        q = m.resolve(call.func)
        if q and q.startswith("builtins.") and q.split(".")[1] in _COMPUTE_BUILTINS:
            names = m.visible(m.scope[call])
            if any(m.is_tensor(a, names) for a in call.args):
                yield call, f"{q.split('.')[1]}() of a tensor"
    for n in m.nodes:
        if m.in_jit(n):
            continue
        names = None
        if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign)):
            names = m.visible(m.scope[n])
        if isinstance(n, ast.BinOp) and (isinstance(n.op, ast.MatMult) or m.is_tensor(n.left, names)
                                         or m.is_tensor(n.right, names)):
            yield n, "tensor arithmetic on the host"
        elif isinstance(n, ast.UnaryOp) and not isinstance(n.op, ast.Not) and m.is_tensor(n.operand, names):
            yield n, "tensor arithmetic on the host"
        elif isinstance(n, ast.Compare) and any(not isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                for op in n.ops) and \
                any(m.is_tensor(e, names) for e in [n.left, *n.comparators]):
            yield n, "tensor comparison on the host"
        elif isinstance(n, ast.AugAssign) and m.is_tensor(n.target, names):
            yield n, "in-place tensor update on the host"
    for stmt, t in m.store_targets():
        if isinstance(t, ast.Subscript) and not m.in_jit(t) and m.is_tensor(t.value, m.visible(m.scope[t])):
            yield t, "writes tensor elements on the host"

"""State that survives the call (`global-state`): global/nonlocal, module-level containers and objects mutated by a
function, mutable defaults, attributes stored on functions, instances or tensors, identity keys, and caches.

`functools.lru_cache`/`functools.cache` are allowed only on pure compile-time helpers: not `launch`, never
handed a tensor, launching no kernel and touching no torch. Anything else is `global-state`: a tensor hashes by
identity, so a cache around tensor arguments is a result cache keyed by `id`.
"""

from __future__ import annotations

import ast

from .registry import GLOBAL, rule
from .source import _Module, _chain_root, _param_names
from .tables import _ALIAS_ATTRS, _CACHES, _FUNCS, _MUTATORS


@rule(GLOBAL, """State that survives the call (global/nonlocal, module-level containers or objects mutated by a
    function, mutable default arguments, attributes stored on functions or tensors, identity keys, caches around
    tensor arguments) is how results get cached across timed calls (by pointer, id or content) and how behaviour
    changes after N calls; a kernel call must be a pure function of its arguments.""")
def _global_state(m: _Module):
    yield from m.hits_for(GLOBAL)
    for n in m.nodes:
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            yield n, f"{type(n).__name__.lower()} {', '.join(n.names)}"
        elif isinstance(n, _FUNCS):
            for d in [*n.args.defaults, *(d for d in n.args.kw_defaults if d)]:
                if _mutable_literal(m, d):
                    yield d, "mutable default argument"
            for d in getattr(n, "decorator_list", []):
                q = m.resolve(d.func if isinstance(d, ast.Call) else d)
                if q in _CACHES and _impure_cache(m, n, q):
                    yield d, f"{q} around {n.name}"
        elif isinstance(n, ast.Call) and m.resolve(n.func) in _CACHES and n.args:
            target = n.args[0]
            f = m.module_funcs.get(target.id) if isinstance(target, ast.Name) else None
            if f is None or _impure_cache(m, f, m.resolve(n.func)):
                yield n, f"{m.resolve(n.func)} applied at run time"
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Call) and m.resolve(n.func.func) in _CACHES and n.args:
            target = n.args[0]
            f = m.module_funcs.get(target.id) if isinstance(target, ast.Name) else None
            if f is None or _impure_cache(m, f, m.resolve(n.func.func)):
                yield n, f"{m.resolve(n.func.func)} applied at run time"
    for _stmt, t in m.store_targets():
        if not isinstance(t, (ast.Subscript, ast.Attribute)):
            continue
        root = _chain_root(t)
        if root is None or m.resolve(root) is not None:
            continue
        scope = m.scope[t]
        if scope is None:
            if isinstance(t, ast.Attribute):
                yield t, f"module-level state stored on {root.id}.{t.attr}"
            continue
        if root.id not in m.locals.get(scope, set()) or root.id in _defaulted_params(scope):
            yield t, f"stores into {root.id!r}, which outlives the call"
        elif _mutates_self(m, scope, root):
            yield t, "stores state on self outside __init__"
        elif isinstance(t, ast.Attribute) and t.attr not in _ALIAS_ATTRS and not t.attr.startswith("__") and \
                m.is_tensor(t.value, m.visible(scope)):
            yield t, f"stores .{t.attr} on a tensor"
    for node, recv, attr in m.host_attrs():
        scope = m.scope[node]
        root = _chain_root(recv)
        if scope is None or root is None or m.resolve(root) is not None:
            continue
        mutating = attr in _MUTATORS or (attr.endswith("_") and not attr.startswith("_"))
        if mutating and (root.id not in m.locals.get(scope, set()) or _mutates_self(m, scope, root)
                         or root.id in _defaulted_params(scope)):
            yield node, f"{root.id}.{attr} mutates state that outlives the call"
    for n in m.nodes:
        if isinstance(n, ast.Call) and m.resolve(n.func) == "functools.partial":
            for a in [*n.args[1:], *(k.value for k in n.keywords)]:
                if _mutable_literal(m, a):
                    yield a, "functools.partial binds a mutable container that outlives the call"


def _mutable_literal(m: _Module, e: ast.AST) -> bool:
    return isinstance(e, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or \
        (isinstance(e, ast.Call) and m.resolve(e.func) in ("builtins.dict", "builtins.list", "builtins.set",
                                                           "builtins.bytearray"))


def _defaulted_params(f: ast.AST) -> set[str]:
    """Parameters with a default value: the default object is shared by every call."""
    a = f.args
    pos = [*a.posonlyargs, *a.args]
    names = {x.arg for x in pos[len(pos) - len(a.defaults):]} if a.defaults else set()
    return names | {x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}


def _mutates_self(m: _Module, scope: ast.AST, root: ast.Name) -> bool:
    """`self.x = ...` in a method other than a constructor: instance state that survives calls."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(m.parent.get(scope),
                                                                                       ast.ClassDef):
        return False
    params = _param_names(scope)
    return bool(params) and root.id == params[0] and scope.name not in ("__init__", "__post_init__", "__new__")


def _impure_cache(m: _Module, f: ast.AST, qual: str) -> bool:
    """A cache decorator is allowed only on a pure compile-time helper (see the module docstring)."""
    if qual == "functools.cached_property" or f in m.launchers or m.tensor_params.get(f):
        return True
    for n in m.nodes:
        if not any(s is f for s in m.enclosing(m.scope.get(n))):
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
            return True  # launches a kernel
        if isinstance(n, (ast.Name, ast.Attribute)) and not m.chain_inner(n):
            q = m.resolve(n)
            if q and q.split(".")[0] == "torch":
                return True
    return False

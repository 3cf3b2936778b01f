"""Reaching into the process or its code: patching modules, classes and dispatch (`monkey-patch`), reading frames,
the heap or raw memory (`introspection`), code built at run time (`dynamic-code`), and imports the rules cannot
review (`disallowed-import`).
"""

from __future__ import annotations

import ast

from .registry import DYN, IMPORT, INTRO, MONKEY, rule
from .source import _Module, _chain_root
from .tables import _DYN_ATTRS, _INTRO_ATTRS, _INTRO_METHODS, _MODULE_DUNDERS, _MONKEY_ATTRS


@rule(MONKEY, """Assigning attributes of imported modules or classes (torch, triton, time, CUDA events,
    builtins), setattr/delattr, patching frameworks and dispatch overrides change the harness's own code in the
    worker process: a patched timer reports any time it likes, a patched torch function changes the reference or
    the checks.""")
def _monkey_patch(m: _Module):
    yield from m.hits_for(MONKEY)
    for _stmt, t in m.store_targets():
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            root = _chain_root(t)
            q = m.resolve(root) if root is not None else None
            if q is not None:
                where = m.resolve(t) if isinstance(t, ast.Attribute) else m.resolve(t.value)
                yield t, f"assigns {where or q}" + ("[...]" if isinstance(t, ast.Subscript) else "")
        elif isinstance(t, ast.Name) and t.id in _MODULE_DUNDERS | {"__builtins__"}:
            yield t, f"rebinds {t.id}"
    for n in m.nodes:
        if isinstance(n, ast.Attribute) and n.attr in _MONKEY_ATTRS:
            yield n, f".{n.attr}"


@rule(INTRO, """Reading the process instead of the inputs: stack frames (sys._getframe, inspect), the heap
    (gc.get_objects), raw memory (ctypes, storages) or the allocator can find the expected answer or the
    harness's buffers and copy them instead of computing.""")
def _introspection(m: _Module):
    yield from m.hits_for(INTRO)
    for n in m.nodes:
        if isinstance(n, ast.Attribute) and n.attr in _INTRO_ATTRS:
            yield n, f".{n.attr}"
    for node, _recv, attr in m.host_attrs():
        if attr in _INTRO_METHODS:
            yield node, f".{attr}"


@rule(DYN, """Code built at run time (exec, eval, compile, __import__, importlib, getattr with a computed name,
    inline C++ extensions) cannot be checked by these rules before it runs, so it is refused outright.""")
def _dynamic_code(m: _Module):
    yield from m.hits_for(DYN)
    for n in m.nodes:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and m.resolve(n.func) == "builtins.getattr" \
                and not m.is_const_getattr(n):
            yield n, "getattr with a computed attribute name"
        elif isinstance(n, ast.Attribute) and n.attr in _DYN_ATTRS:
            yield n, f".{n.attr}"


@rule(IMPORT, """Only triton, triton.language, math, typing, functools and torch (for metadata) may be imported;
    anything else (numpy, collections, itertools, random, star or relative imports, ...) is not needed by a
    kernel and cannot be reviewed by these rules.""")
def _disallowed_import(m: _Module):
    yield from m.hits_for(IMPORT)

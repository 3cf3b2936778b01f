"""The allow-list (`not-allowed`): candidate code may name only what its op declares (`OpSpec.code_policy`,
base/records/allow.py), whatever the deny-list rules beside it say.

What is checked, on every line of the module (host code and @jit bodies alike: the interpreter runs both):
- every name reached from an import, resolved through `import ... as`, `from ... import`, plain assignments and
  `getattr(module, "literal", default)`, must be a declared name or a public attribute of a declared module, and
  walking it on the installed library must not pass through a module that is not declared (Triton's submodules
  re-export `os`, `sys`, `importlib`: `triton.runtime.driver.os`, `triton.language.core.builtins` are refused);
- a module is never a value: it may be imported and its attributes used, but not stored, passed, put in a
  container or a default (`x = triton.runtime`, `f(tl)`, `def g(m=torch)` are refused), so no reference to a
  module escapes the resolution above;
- builtins: only the declared ones (no getattr/setattr/delattr/vars/dir/eval/exec/compile/open/__import__/globals/
  locals/breakpoint/input/type/object/super); `getattr` only as `getattr(<declared module>, "<name>", default)`
  naming a declared attribute;
- attributes of values the check cannot resolve (tensors, configs, dtypes, the candidate's own objects): the
  declared attribute names, the public attributes of the declared types, and names the candidate assigns or
  defines in its own classes; never a dunder outside the declared few, never frame, code, generator or traceback
  fields (`f_back`, `gi_frame`, `tb_frame`, `co_code`, `cell_contents`), never `str.format` fields;
- imports: declared modules, or packages on the way to a declared name (`import torch`); no star or relative import.

A rejection names the construct and its line, e.g. "triton.runtime.driver: triton.runtime is not on the op's
allow-list". What this does not see: a value that flows into an unresolved name some other way than the forms above
is still held to the attribute allow-list, not to its module's.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import types
from typing import Iterator

from ....base.records.allow import CodePolicy
from .registry import ALLOW, rule
from .source import _Module

_FRAME_PREFIXES = ("f_", "gi_", "cr_", "ag_", "tb_", "co_")
_NEVER = frozenset({"cell_contents", "format", "format_map", "mro", "used_global_vals", "fn", "globals",
                    "builtins"})
_MISSING = object()


NOT_DEFINED = "not defined by the installed library (so not reviewable)"


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _never(name: str, dunders: frozenset[str]) -> bool:
    return name in _NEVER or name.startswith(_FRAME_PREFIXES) or (_dunder(name) and name not in dunders)


def _step(obj, name: str):
    """Attribute `name` of `obj` without running descriptors or lazy imports; _MISSING when not there."""
    try:
        if isinstance(obj, types.ModuleType):
            got = vars(obj).get(name, _MISSING)
            return sys.modules.get(f"{obj.__name__}.{name}", _MISSING) if got is _MISSING else got
        return inspect.getattr_static(obj, name, _MISSING)
    except Exception:  # noqa: BLE001 - exotic objects: unknown
        return _MISSING


class Allowed:
    """One policy, expanded: the attribute names of its types, its modules imported (they are trusted libraries)."""

    def __init__(self, policy: CodePolicy):
        self.modules = frozenset(policy.modules)
        self.names = tuple(policy.names)
        self.builtins = frozenset(policy.builtins)
        self.dunders = frozenset(policy.dunders)
        attrs = set(policy.attributes)
        for t in policy.attribute_types:
            obj = self.object(t)
            if obj is not _MISSING:
                attrs |= {n for n in dir(obj) if not n.startswith("_")}
        self.attributes = frozenset(a for a in attrs if not _never(a, self.dunders))
        # packages on the way to a declared module or name: importable (`import torch`), never values
        self.packages = frozenset(".".join(q.split(".")[:i]) for q in [*self.modules, *self.names]
                                  for i in range(1, q.count(".") + 1))

    @staticmethod
    def object(qual: str):
        """What a declared qualified name (from the policy, never from a candidate) denotes; _MISSING if none."""
        parts = qual.split(".")
        obj, start = _MISSING, 1
        for i in range(len(parts), 0, -1):   # the longest importable prefix: declared names are trusted libraries
            try:
                obj, start = importlib.import_module(".".join(parts[:i])), i
                break
            except ImportError:
                continue
        if obj is _MISSING:
            return _MISSING
        for p in parts[start:]:
            obj = _step(obj, p)
            if obj is _MISSING:
                return _MISSING
        return obj

    def module(self, name: str):
        if name not in self.modules:
            return _MISSING
        try:
            return importlib.import_module(name)
        except ImportError:
            return _MISSING

    def check(self, qual: str, *, value: bool = True) -> str | None:
        """Why `qual` may not be used (as a value when `value`), or None when it may."""
        parts = qual.split(".")
        bad = next((p for p in parts[1:] if _never(p, self.dunders) or (p.startswith("_") and not _dunder(p))),
                   None)
        if bad is not None:
            return f"{qual}: attribute {bad} is never allowed"
        if parts[0] == "builtins":
            if len(parts) == 1:
                return "the builtins module"
            return None if parts[1] in self.builtins else f"builtin {parts[1]}() is not on the op's allow-list"
        if parts[0] == "__module__":
            return None if parts[-1] in self.dunders else f"module attribute {parts[-1]}"
        name = next((n for n in self.names if qual == n or qual.startswith(n + ".")), None)
        if name is not None and qual == name:
            return None
        base = name or next((".".join(parts[:i]) for i in range(len(parts), 0, -1)
                             if ".".join(parts[:i]) in self.modules), None)
        if base is None:
            if qual in self.packages:
                return None if not value else f"module {qual} used as a value"
            known = max((p for p in self.packages | self.modules if qual.startswith(p + ".")), key=len, default=None)
            where = ".".join(parts[:known.count(".") + 2]) if known else parts[0]
            return f"{qual}: {where} is not on the op's allow-list"
        obj = self.module(base) if name is None else self.object(base)
        for i in range(base.count(".") + 1, len(parts)):
            if obj is _MISSING:
                break
            obj = _step(obj, parts[i])
            if isinstance(obj, types.ModuleType) and obj.__name__ not in self.modules:
                return f"{qual}: {'.'.join(parts[:i + 1])} is the module {obj.__name__}, not on the op's allow-list"
        if obj is _MISSING:
            return f"{qual}: {NOT_DEFINED}"
        if value and isinstance(obj, types.ModuleType):
            return f"module {qual} used as a value"
        return None


@functools.lru_cache(maxsize=16)
def _allowed(policy_json: str) -> Allowed:
    return Allowed(CodePolicy.model_validate_json(policy_json))


def _own_attributes(m: _Module, allowed: Allowed) -> frozenset[str]:
    """Attribute names the candidate defines: assigned on its objects, or defined in its classes' bodies."""
    out = set()
    for n in m.nodes:
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and m.resolve(n.value) is None:
            out.add(n.attr)
        elif isinstance(n, ast.ClassDef):
            for s in n.body:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.add(s.name)
                for t in (s.targets if isinstance(s, ast.Assign) else [getattr(s, "target", None)]):
                    if isinstance(t, ast.Name):
                        out.add(t.id)
    return frozenset(a for a in out if not _never(a, allowed.dunders))


def _import_hits(m: _Module, allowed: Allowed, n: ast.Import | ast.ImportFrom) -> Iterator[tuple[ast.AST, str]]:
    if isinstance(n, ast.ImportFrom):
        if n.level or not n.module:
            yield n, "relative import"
            return
        for a in n.names:
            if a.name == "*":
                yield n, f"from {n.module} import * (names cannot be resolved)"
                continue
            why = allowed.check(f"{n.module}.{a.name}", value=False)
            if why:
                yield n, f"from {n.module} import {a.name}: {why}"
        return
    for a in n.names:
        if a.name not in allowed.modules and a.name not in allowed.packages:
            yield n, f"import {a.name}: not on the op's allow-list"


def _getattr_ok(m: _Module, allowed: Allowed, call: ast.AST) -> bool:
    """`getattr(<declared module>, "<declared name>", default)`: a version feature test, no reflection."""
    if not m.is_const_getattr(call):
        return False
    base = m.resolve(call.args[0])
    if base is None or base not in allowed.modules or len(call.args) != 3 or call.keywords:
        return False
    why = allowed.check(f"{base}.{call.args[1].value}")
    # a name this library version lacks gives the default (checked as code of its own), unless the module computes
    # missing attributes itself (a module-level __getattr__ could hand back anything)
    module = allowed.module(base)
    return why is None or (why.endswith(NOT_DEFINED) and module is not _MISSING and "__getattr__" not in vars(module))


def _name_hits(m: _Module, allowed: Allowed, n: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    if isinstance(n, ast.Name) and _dunder(n.id) and not (n.id in allowed.dunders and isinstance(n.ctx, ast.Load)):
        yield n, f"name {n.id}"
        return
    if m.chain_inner(n):
        p = m.parent.get(n)
        if isinstance(p, ast.Call) and not _getattr_ok(m, allowed, p):
            yield n, "getattr with a module"   # getattr(module, "x") outside the form allowed above
        return
    if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
        return
    if isinstance(n, ast.Name) and m.resolve(n) == "builtins.getattr":
        if not _getattr_ok(m, allowed, m.parent.get(n)):
            yield n, "builtin getattr() (string-based attribute access)"
        return
    q = m.resolve(n)
    if q is not None:
        if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load):
            yield n, f"assigns {q}"
        elif (why := allowed.check(q)) is not None:
            yield n, why


def _attribute_hits(m: _Module, allowed: Allowed, own: frozenset[str], n: ast.Attribute):
    if m.resolve(n.value) is not None or (n.attr in own and not isinstance(n.value, ast.Constant)):
        return
    if _never(n.attr, allowed.dunders):
        yield n, f".{n.attr} (frames, code, dunders and format fields are never allowed)"
    elif n.attr not in allowed.attributes:
        yield n, f".{n.attr}: not an attribute on the op's allow-list"


@rule(ALLOW, """Candidate code may name only what its op declares (base/records/allow.py): Triton's kernel language
    and launch helpers, Gluon where the op uses it, torch's allocation and metadata, math and typing. Triton's and
    torch's modules re-export os, sys, importlib and the builtins, so a deny-list of names cannot hold; anything not
    declared -- a module reached through a re-export, reflection builtins, dunders, frames -- is refused.""")
def _not_allowed(m: _Module):
    allowed = _allowed(m.spec.code_policy.to_json())
    own = _own_attributes(m, allowed)
    for n in m.nodes:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            yield from _import_hits(m, allowed, n)
        elif isinstance(n, ast.Name) or (isinstance(n, ast.Attribute) and m.resolve(n.value) is not None):
            yield from _name_hits(m, allowed, n)
        elif isinstance(n, ast.Attribute):
            yield from _attribute_hits(m, allowed, own, n)
        elif isinstance(n, ast.MatchClass) and n.kwd_attrs:
            yield n, "class pattern with keyword attributes (attribute access by name)"
        elif isinstance(n, ast.Call) and m.is_const_getattr(n) and not _getattr_ok(m, allowed, n):
            yield n, f"getattr(..., {n.args[1].value!r}) (string-based attribute access)"


__all__ = ["Allowed"]

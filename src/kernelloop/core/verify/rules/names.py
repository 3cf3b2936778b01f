"""How names are seen: every name resolved to a qualified name (imports, aliases, plain assignments, `getattr`
with a literal name), classified against the name tables, and the narrow dtypes an expression names.

`_Names` is a part of `source._Module` (a mixin): it reads the module's `nodes` and `dtypes`, and
`library_names`, set up by `_Module.__init__`.
"""

from __future__ import annotations

import ast
import inspect
import sys
import types

import torch

from ....base.records import DType
from .registry import DYN, HOT, IMPORT, LIB, PREC
from .tables import (_BUILTIN_NAMES, _BUILTIN_RULES, _EXACT, _MISSING, _MODULE_DUNDERS, _STEMS, _TORCH_METADATA,
                     ALLOWED_IMPORT_ROOTS)


def _dtype_family(qual: str) -> str | None:
    """fp16/bf16/fp8 for a narrow floating dtype's qualified name (triton.language or torch), else None."""
    parts = qual.split(".")
    if parts[:2] == ["triton", "language"]:
        leaf = parts[-1]
        if leaf in ("float16", "fp16"):
            return "fp16"
        if leaf in ("bfloat16", "bf16"):
            return "bf16"
        return "fp8" if leaf.startswith(("float8", "fp8")) else None
    if parts[0] == "torch":
        leaf = parts[-1]
        if leaf in ("float16", "half", "HalfTensor"):
            return "fp16"
        if leaf in ("bfloat16", "BFloat16Tensor"):
            return "bf16"
        return "fp8" if leaf.startswith("float8") else None
    return None


def _torch_object(qual: str):
    """The object a torch-rooted name denotes, without triggering lazy imports; _MISSING when unknown."""
    parts = qual.split(".")
    obj = torch
    for i, p in enumerate(parts[1:], start=2):
        try:
            if isinstance(obj, types.ModuleType):
                nxt = vars(obj).get(p, _MISSING)
                if nxt is _MISSING:
                    nxt = sys.modules.get(".".join(parts[:i]), _MISSING)
            else:
                nxt = inspect.getattr_static(obj, p, _MISSING)
        except Exception:  # noqa: BLE001 - exotic descriptors: treat as unknown
            return _MISSING
        if nxt is _MISSING:
            return _MISSING
        obj = nxt
    return obj


class _Names:
    """Name resolution and classification of one parsed candidate (see the module docstring)."""

    # -- names ----------------------------------------------------------------------------------------------
    def _names(self) -> tuple[dict[str, str], set[str]]:
        aliases: dict[str, str] = {}
        bound: set[str] = set()
        assigns: list[tuple[str, ast.AST]] = []
        assigned: set[str] = set()
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom):
                for a in n.names:
                    if a.name == "*":
                        continue
                    if n.level or not n.module:
                        bound.add(a.asname or a.name)
                    else:
                        aliases[a.asname or a.name] = f"{n.module}.{a.name}"
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(n.name)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                bound.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if n.value is None:
                    continue
                for t in targets:
                    if isinstance(t, ast.Name):
                        assigns.append((t.id, n.value))
                        assigned.add(t.id)
                    elif isinstance(t, (ast.Tuple, ast.List)) and isinstance(n.value, (ast.Tuple, ast.List)) \
                            and len(t.elts) == len(n.value.elts):
                        for te, ve in zip(t.elts, n.value.elts):
                            if isinstance(te, ast.Name):
                                assigns.append((te.id, ve))
                                assigned.add(te.id)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                bound.add(n.id)
            elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                bound.add(n.name)
        bound -= assigned  # decided below, from what they are assigned
        self.aliases, self.bound = aliases, bound
        for _ in range(3):
            for name, value in assigns:
                q = self.resolve(value)
                if q is not None and name not in aliases:
                    aliases[name] = q
        for name, _value in assigns:
            if name not in aliases:
                bound.add(name)
        return aliases, bound

    def resolve(self, e: ast.AST) -> str | None:
        """Qualified name an expression denotes ('torch.nn.functional.layer_norm'), or None."""
        if isinstance(e, ast.Name):
            if e.id in self.aliases:
                return self.aliases[e.id]
            if e.id in self.bound:
                return None
            if e.id == "__builtins__":
                return "builtins"
            if e.id in _MODULE_DUNDERS:
                return "__module__." + e.id
            return "builtins." + e.id if e.id in _BUILTIN_NAMES else None
        if isinstance(e, ast.Attribute):
            base = self.resolve(e.value)
            return f"{base}.{e.attr}" if base else None
        if self.is_const_getattr(e):
            base = self.resolve(e.args[0])
            return f"{base}.{e.args[1].value}" if base else None
        return None

    def is_const_getattr(self, e: ast.AST) -> bool:
        return (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and self.resolve(e.func) == "builtins.getattr"
                and len(e.args) >= 2 and isinstance(e.args[1], ast.Constant) and isinstance(e.args[1].value, str))

    def chain_inner(self, node: ast.AST) -> bool:
        p = self.parent.get(node)
        return (isinstance(p, ast.Attribute) and p.value is node) or \
            (self.is_const_getattr(p) and p.args[0] is node)

    def receiver_method(self, call: ast.Call) -> tuple[ast.AST, str] | None:
        f = call.func
        if isinstance(f, ast.Attribute):
            return f.value, f.attr
        if self.is_const_getattr(f):
            return f.args[0], f.args[1].value
        return None

    def classify(self, qual: str, *, importing: bool = False) -> str | None:
        parts = tuple(qual.split("."))
        if parts[0] == "builtins":
            return DYN if len(parts) == 1 else _BUILTIN_RULES.get(parts[1])
        found = None
        for i in range(len(parts), 0, -1):
            found = _EXACT.get(parts[:i])
            if found is None:
                found = next((r for stem, r in _STEMS.items()
                              if len(stem) == i and parts[:i - 1] == stem[:-1] and parts[i - 1].startswith(stem[-1])),
                             None)
            if found:
                break
        if found == PREC and DType.fp32 not in self.dtypes:
            found = HOT
        if found:
            return found
        if parts[0] == "torch" and self.library_names & set(parts[1:]):
            return LIB
        if parts[0] != "torch" or importing:
            return None
        if qual in _TORCH_METADATA or parts[:2] == ("torch", "version"):
            return None
        obj = _torch_object(qual)
        if isinstance(obj, (types.ModuleType, torch.dtype)):
            return None
        return HOT

    def _name_hits(self) -> list[tuple[str, ast.AST, str]]:
        hits = []
        for n in self.nodes:
            if isinstance(n, (ast.Name, ast.Attribute)) or self.is_const_getattr(n):
                if self.chain_inner(n) or (isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)):
                    continue
                q = self.resolve(n)
                r = self.classify(q) if q else None
                if r:
                    hits.append((r, n, q))
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                if isinstance(n, ast.ImportFrom) and (n.level or not n.module):
                    hits.append((IMPORT, n, "relative import"))
                    continue
                quals = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                    [n.module] + [f"{n.module}.{a.name}" for a in n.names if a.name != "*"]
                if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
                    hits.append((IMPORT, n, f"from {n.module} import * (names cannot be resolved)"))
                rules = [(self.classify(q, importing=True), q) for q in quals]
                specific = [(r, q) for r, q in rules if r]
                if specific:
                    hits.extend((r, n, q) for r, q in specific)
                elif quals[0].split(".")[0] not in ALLOWED_IMPORT_ROOTS:
                    hits.append((IMPORT, n, quals[0]))
        return hits

    def narrow(self, e: ast.AST | None) -> str | None:
        """The narrow floating dtype named inside an expression, if it is below a dtype the candidate runs on."""
        if e is None:
            return None
        for sub in ast.walk(e):
            if isinstance(sub, (ast.Name, ast.Attribute)):
                q = self.resolve(sub)
                fam = _dtype_family(q) if q else None
                if fam and self.below(fam):
                    return q
        return None

    def below(self, family: str) -> bool:
        """Whether a value cast to this narrow family loses precision for some dtype the candidate runs on."""
        return family == "fp8" or any(d.value != family for d in self.dtypes)

"""The source analysis the rules share: one parsed candidate with its parents, scopes, jit functions, resolved
names (`names._Names`) and inferred tensors (`infer._Tensors`), and the walks the rules iterate over (host
attribute reads, host calls, store targets, name hits per rule).

`if __name__ == "__main__":` blocks are not indexed: the worker imports candidates under another module name, so
they never run.
"""

from __future__ import annotations

import ast
from typing import Iterable, Iterator

from ....base.records import DType, OpSpec
from .infer import _Tensors
from .names import _Names
from .tables import _FUNCS, _JIT, _LIBRARY_NAMES


def _is_main_guard(test: ast.AST) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    pair = (test.left, test.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" and isinstance(b, ast.Constant) and b.value == "__main__"
               for a, b in (pair, pair[::-1]))


def _flat_targets(t: ast.AST) -> Iterator[ast.AST]:
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _flat_targets(e)
    elif isinstance(t, ast.Starred):
        yield from _flat_targets(t.value)
    else:
        yield t


def _chain_root(e: ast.AST) -> ast.Name | None:
    """The Name at the bottom of an attribute/subscript/call chain (`a` of `a.b[c].d()`)."""
    while True:
        if isinstance(e, (ast.Attribute, ast.Subscript, ast.Starred)):
            e = e.value
        elif isinstance(e, ast.Call):
            e = e.func
        else:
            return e if isinstance(e, ast.Name) else None


def _param_names(f: ast.AST) -> list[str]:
    a = f.args
    names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return names


class _Module(_Names, _Tensors):
    """One parsed candidate: parents, scopes, jit functions, resolved names, inferred tensors."""

    def __init__(self, source: str, tree: ast.Module, spec: OpSpec, dtypes: Iterable[DType]):
        self.lines = source.splitlines()
        self.spec = spec
        self.dtypes = {DType(d) for d in dtypes}
        self.library_names = _LIBRARY_NAMES.get(spec.name, {spec.name})
        self.parent: dict[ast.AST, ast.AST | None] = {}
        self.scope: dict[ast.AST, ast.AST | None] = {}
        self.nodes: list[ast.AST] = []
        self._index(tree)
        self.by_scope: dict[ast.AST | None, list[ast.AST]] = {}
        for n in self.nodes:
            self.by_scope.setdefault(self.scope[n], []).append(n)
        self.funcs = [n for n in self.nodes if isinstance(n, _FUNCS)]
        self.aliases, self.bound = self._names()
        self.jit = self._jit_functions()
        self.locals = {f: self._locals(f) for f in self.funcs}
        self.module_funcs = {n.name: n for n in self.nodes
                             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.scope[n] is None}
        self.launchers = self._launchers()
        self.tensor_params, self.tensors = self._infer_tensors()
        self.name_hits = self._name_hits()

    # -- structure ------------------------------------------------------------------------------------------
    def _index(self, tree: ast.Module) -> None:
        stack: list[tuple[ast.AST, ast.AST | None, ast.AST | None]] = [(tree, None, None)]
        while stack:
            node, parent, scope = stack.pop()
            self.parent[node], self.scope[node] = parent, scope
            if node is not tree:
                self.nodes.append(node)
            if isinstance(node, ast.If) and _is_main_guard(node.test):
                children = [(c, scope) for c in [node.test, *node.orelse]]
            elif isinstance(node, _FUNCS):
                a = node.args
                outer = [*getattr(node, "decorator_list", []), *a.defaults, *(d for d in a.kw_defaults if d),
                         *([node.returns] if getattr(node, "returns", None) else [])]
                outer += [x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                          if x is not None and x.annotation is not None]
                inner = [x for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None]
                body = node.body if isinstance(node.body, list) else [node.body]
                children = [(c, scope) for c in outer] + [(c, node) for c in [*inner, *body]]
            elif isinstance(node, ast.arg):
                children = []
            else:
                children = [(c, scope) for c in ast.iter_child_nodes(node)]
            for c, s in reversed(children):
                stack.append((c, node, s))

    def enclosing(self, scope: ast.AST | None) -> Iterator[ast.AST | None]:
        while scope is not None:
            yield scope
            scope = self.scope[scope]
        yield None

    def in_jit(self, node: ast.AST) -> bool:
        """Whether a node is (inside) a @triton.jit function."""
        return node in self.jit or any(s in self.jit for s in self.enclosing(self.scope.get(node)))

    # -- functions ------------------------------------------------------------------------------------------
    def _jit_functions(self) -> set[ast.AST]:
        jit = set()
        for f in self.funcs:
            for d in getattr(f, "decorator_list", []):
                if self.resolve(d.func if isinstance(d, ast.Call) else d) in _JIT:
                    jit.add(f)
        by_name = {f.name: f for f in self.funcs if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for n in self.nodes:  # k = triton.jit(fn)
            if isinstance(n, ast.Call) and self.resolve(n.func) in _JIT:
                for a in n.args:
                    if isinstance(a, ast.Name) and a.id in by_name:
                        jit.add(by_name[a.id])
        return jit

    def _locals(self, f: ast.AST) -> set[str]:
        names = set(_param_names(f))
        declared: set[str] = set()
        for n in self.by_scope.get(f, []):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                names.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name.split(".")[0]) for a in n.names)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                names.add(n.name)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                declared.update(n.names)
        return names - declared

    def _launchers(self) -> set[ast.AST]:
        out = set()
        for n in self.nodes:
            if self.scope[n] is not None:
                continue
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "launch":
                out.add(n)
            elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "launch" for t in n.targets):
                if isinstance(n.value, ast.Lambda):
                    out.add(n.value)
                elif isinstance(n.value, ast.Name) and n.value.id in self.module_funcs:
                    out.add(self.module_funcs[n.value.id])
        return out

    def host_attrs(self) -> Iterator[tuple[ast.AST, ast.AST, str]]:
        """(node, receiver, attribute) for every attribute read on an unresolved receiver in host code.

        Attribute reads, not only calls: `f = y.copy_; f(x)` is the same as `y.copy_(x)`."""
        for n in self.nodes:
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                recv, attr = n.value, n.attr
            elif self.is_const_getattr(n):
                recv, attr = n.args[0], n.args[1].value
            else:
                continue
            if isinstance(recv, ast.Constant) or self.resolve(recv) is not None or self.in_jit(n):
                continue
            yield n, recv, attr

    def host_calls(self) -> Iterator[ast.Call]:
        for n in self.nodes:
            if isinstance(n, ast.Call) and not self.in_jit(n):
                yield n

    def store_targets(self) -> Iterator[tuple[ast.AST, ast.AST]]:
        """(statement, target) for every assignment, augmented assignment and deletion target."""
        for n in self.nodes:
            if isinstance(n, ast.Assign):
                targets = n.targets
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
                targets = [n.target]
            elif isinstance(n, ast.Delete):
                targets = n.targets
            elif isinstance(n, (ast.For, ast.AsyncFor)):
                targets = [n.target]
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                targets = [n.optional_vars]
            else:
                continue
            for t in targets:
                for flat in _flat_targets(t):
                    yield n, flat

    def hits_for(self, rule_id: str) -> Iterator[tuple[ast.AST, str]]:
        for r, node, qual in self.name_hits:
            if r == rule_id:
                yield node, qual

"""Which host expressions are tensors: inferred from `launch`'s positional parameters (the op's inputs and outputs)
and the harness's `scratch` workspace, through assignments, loops, `with` targets and calls of the module's own
helpers. Metadata and shapes are not tensors.

`_Tensors` is a part of `source._Module` (a mixin): it reads the module's `nodes`, `scope`, `funcs`, `launchers`
and `module_funcs`, and uses its name resolution (`resolve`, `classify`, `receiver_method`).
"""

from __future__ import annotations

import ast

from .registry import ALIAS, HOT, LIB, PREC
from .tables import _META_ATTRS, _NON_TENSOR_RESULTS


class _Tensors:
    """Tensor inference over one parsed candidate (see the module docstring)."""

    def visible(self, scope: ast.AST | None, tensors: dict | None = None) -> set[str]:
        tensors = self.tensors if tensors is None else tensors
        out: set[str] = set()
        for s in self.enclosing(scope):
            out |= tensors.get(s, set())
        return out

    def _workspace_lookup(self, e: ast.AST) -> bool:
        """`config["scratch"]`, `config.get("scratch")` or `.pop` on a launcher's **kwargs: the harness's workspace."""
        kw = {f.args.kwarg.arg for f in self.launchers if f.args.kwarg}
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and e.value.id in kw:
            return isinstance(e.slice, ast.Constant) and e.slice.value == "scratch"
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("get", "pop") \
                and isinstance(e.func.value, ast.Name) and e.func.value.id in kw:
            return bool(e.args) and isinstance(e.args[0], ast.Constant) and e.args[0].value == "scratch"
        return False

    def is_tensor(self, e: ast.AST, names: set[str]) -> bool:
        """Whether a host expression evaluates to a tensor (inferred; metadata and shapes are not tensors)."""
        if self._workspace_lookup(e):
            return True
        if isinstance(e, ast.Name):
            return e.id in names
        if isinstance(e, (ast.Starred, ast.Subscript, ast.NamedExpr)):
            return self.is_tensor(e.value, names)
        if isinstance(e, ast.Attribute):
            return self.resolve(e) is None and e.attr not in _META_ATTRS and self.is_tensor(e.value, names)
        if isinstance(e, ast.Call):
            q = self.resolve(e.func)
            if q is not None:
                return q.startswith("torch.") and self.classify(q) in (HOT, LIB, PREC, ALIAS)
            rm = self.receiver_method(e)
            return bool(rm) and rm[1] not in _NON_TENSOR_RESULTS and self.is_tensor(rm[0], names)
        if isinstance(e, ast.BinOp):
            return self.is_tensor(e.left, names) or self.is_tensor(e.right, names)
        if isinstance(e, ast.UnaryOp):
            return self.is_tensor(e.operand, names)
        if isinstance(e, ast.IfExp):
            return self.is_tensor(e.body, names) or self.is_tensor(e.orelse, names)
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):  # a container of tensors: its items are tensors
            return any(self.is_tensor(x, names) for x in e.elts)
        if isinstance(e, ast.Dict):
            return any(self.is_tensor(x, names) for x in e.values)
        return False

    def _bind(self, target: ast.AST, value: ast.AST | None, names: set[str], out: set[str], whole: bool) -> None:
        if isinstance(target, ast.Name):
            if whole or (value is not None and self.is_tensor(value, names)):
                out.add(target.id)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, value, names, out, whole)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._bind(t, v, names, out, whole)
            else:
                tensor = whole or (value is not None and self.is_tensor(value, names))
                for t in target.elts:
                    self._bind(t, None, names, out, tensor)

    def _infer_tensors(self) -> tuple[dict, dict]:
        host = [f for f in self.funcs if not self.in_jit(f)]
        params: dict = {f: set() for f in host}
        for f in self.launchers:
            a = f.args
            # the op's tensors come positionally; the harness's workspace comes as the keyword `scratch`
            params[f] = {x.arg for x in [*a.posonlyargs, *a.args]} | ({a.vararg.arg} if a.vararg else set()) \
                | {x.arg for x in a.kwonlyargs if x.arg == "scratch"}
        tensors: dict = {}
        for _ in range(4):
            tensors = {s: set(params.get(s, ())) for s in [None, *host]}
            for _ in range(2):
                for n in self.nodes:
                    s = self.scope[n]
                    if s is not None and s not in tensors:
                        continue
                    names = self.visible(s, tensors)
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            self._bind(t, n.value, names, tensors[s], False)
                    elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                        self._bind(n.target, n.value, names, tensors[s], False)
                    elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                        self._bind(n.target, None, names, tensors[s], self.is_tensor(n.iter, names))
                    elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                        self._bind(n.optional_vars, n.context_expr, names, tensors[s], False)
            changed = False
            for n in self.nodes:
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.module_funcs):
                    continue
                s = self.scope[n]
                if s is not None and s not in tensors:
                    continue
                callee = self.module_funcs[n.func.id]
                if callee not in params:
                    continue
                names = self.visible(s, tensors)
                pos = [x.arg for x in [*callee.args.posonlyargs, *callee.args.args]]
                for i, arg in enumerate(n.args):
                    if self.is_tensor(arg, names):
                        name = pos[i] if i < len(pos) and not isinstance(arg, ast.Starred) else \
                            (callee.args.vararg.arg if callee.args.vararg else None)
                        if name and name not in params[callee]:
                            params[callee].add(name)
                            changed = True
                for kw in n.keywords:
                    if kw.arg and self.is_tensor(kw.value, names) and kw.arg not in params[callee]:
                        params[callee].add(kw.arg)
                        changed = True
            if not changed:
                break
        return params, tensors

"""Sources import writes: reference.py around a Definition's `run`, and a template around a Solution's entry point.

reference.py. kernelloop calls `reference(*tensors, **scalars)`; a Definition's `run` takes every input
positionally in the Definition's order. The Definition's source is embedded verbatim and executed in a namespace
of its own (so a `reference` or helper it defines cannot collide with the adapter -- kernelloop's own exports
define one), then `reference` calls its `run`. Everything stays in the one file kernelloop hashes into a run's
manifest.

The template. kernelloop calls `launch(*inputs, *outputs, **scalars, **config)`; a destination-passing Solution's
entry point takes (inputs in Definition order, then outputs). The solution's file is kept verbatim and an adapter
`launch` is appended. Its space is one point: the parameter SOLUTION with the solution's name as its only value
(kernelloop's TemplateSpec needs at least one parameter; the solution's own tuning is baked into its code).
Templates cannot use `exec` (kernelloop's static rules reject dynamic code), hence no namespace isolation there:
a solution whose functions call a global `launch` of their own is refused instead.
"""

from __future__ import annotations

import ast

from . import flashinfer_trace as fi
from .errors import InteropError
from ...base import pyast

ADAPTER_PARAM = "SOLUTION"


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return names


def _embed(source: str) -> str:
    """A Python literal whose value is `source` exactly: a raw triple-quoted string when that is exact, else repr."""
    raw = "r'''" + source + "'''"
    try:
        if ast.literal_eval(raw) == source:
            return raw
    except (SyntaxError, ValueError):
        pass
    return repr(source)


def reference_source(d: fi.Definition, tensors: list[str], scalars: list[str]) -> str:
    order = list(d.inputs)
    sig = ", ".join(tensors + (["*"] + scalars if scalars else []))
    return f'''"""Reference of FlashInfer-Trace Definition `{d.name}` (op_type `{d.op_type}`).

Written by `kernelloop trace import`. The Definition's reference source is below, verbatim; it runs in a
namespace of its own and `reference` calls its `run` with the inputs in the Definition's order
({", ".join(order)}). kernelloop calls this on float64 copies of the inputs for the truth and on op-dtype inputs
for the eager baseline.
"""

DEFINITION_REFERENCE = {_embed(d.reference)}

_kl_namespace = {{"__name__": "flashinfer_definition_{d.name}"}}
exec(compile(DEFINITION_REFERENCE, "<definition {d.name} reference>", "exec"), _kl_namespace)
_kl_run = _kl_namespace["run"]


def reference({sig}):
    return _kl_run({", ".join(order)})
'''


def _calls_global(tree: ast.Module, name: str) -> bool:
    """Whether a function body of the module loads the global `name` (not counting module-level statements)."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            body = fn.body if isinstance(fn.body, list) else [fn.body]
            for stmt in body:
                for n in ast.walk(stmt):
                    if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                        return True
    return False


def check_solution(sol: fi.Solution, d: fi.Definition) -> tuple[str, ast.Module]:
    """The entry source of a solution kernelloop can call as a template; InteropError naming what does not fit."""
    if sol.definition != d.name:
        raise InteropError("solution.definition", f"{sol.definition!r} is not the definition {d.name!r}")
    if sol.spec.language is not fi.SupportedLanguages.TRITON:
        raise InteropError("solution.spec.language", f"{sol.spec.language.value!r}: kernelloop templates are Triton")
    if not sol.spec.destination_passing_style:
        raise InteropError("solution.spec.destination_passing_style",
                           "false: a value-returning solution allocates its outputs, which kernelloop's harness "
                           "allocates and poisons itself (and its static rules reject allocation in a candidate); "
                           "only destination-passing solutions become templates")
    if len(sol.sources) != 1:
        raise InteropError("solution.sources", f"{len(sol.sources)} files: kernelloop imports a template as one "
                                               f"module, so only single-file solutions are supported")
    if not sol.entry_file.endswith(".py"):
        raise InteropError("solution.spec.entry_point", f"{sol.entry_file!r} is not a Python file")
    src = sol.entry_source().content
    try:
        tree = pyast.parse(src)
    except SyntaxError as e:
        raise InteropError("solution.sources.0.content", f"not valid Python: {e}") from None
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if sol.entry_symbol not in fns:
        raise InteropError("solution.spec.entry_point", f"{sol.entry_symbol!r} is not a top-level function of "
                                                        f"{sol.entry_file}")
    if sol.entry_symbol == "launch" or ADAPTER_PARAM in top_level_names(tree):
        raise InteropError("solution.spec.entry_point", f"the solution defines `{sol.entry_symbol}`/"
                                                        f"`{ADAPTER_PARAM}`, names the adapter needs")
    for kind, names in (("inputs", d.inputs), ("outputs", d.outputs)):
        for k in names:
            if k in (ADAPTER_PARAM, sol.entry_symbol):
                raise InteropError(f"{kind}.{k}", f"is named like the adapter's `{k}`: rename it")
    if "launch" in top_level_names(tree) and _calls_global(tree, "launch"):
        raise InteropError("solution.sources.0.content", "its functions call a global `launch`, which the kernelloop "
                                                         "adapter (named `launch`) would replace")
    return src, tree


def template_source(sol: fi.Solution, d: fi.Definition, tensors: list[str], scalars: list[str],
                    outputs: list[str]) -> str:
    """The solution's file verbatim plus kernelloop's `launch` calling its entry point (destination passing)."""
    src, _ = check_solution(sol, d)
    order = list(d.inputs)
    sig = ", ".join(tensors + outputs + ["*"] + scalars + [ADAPTER_PARAM])
    return (src.rstrip("\n") + f'''


# ---- kernelloop template adapter (written by `kernelloop trace import`) -------------------------------------
def launch({sig}):
    """kernelloop's call (inputs, outputs, scalars by keyword) as `{sol.entry_symbol}(inputs..., outputs...)`.
    {ADAPTER_PARAM} names the one configuration this template has: solution `{sol.name}` as submitted."""
    {sol.entry_symbol}({", ".join(order + outputs)})
''')

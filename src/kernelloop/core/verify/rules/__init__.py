"""Static source rules: what a kernel candidate may not do, each with the attack it closes.

`check_source(source, spec)` parses a candidate with `ast` (it never imports or runs it) and returns one
`StaticRuleHit` per broken rule and line, first line first. Any hit makes the verdict REJECTED; the controller
runs this before the worker ever sees the source.

What a candidate is. A module that imports only `triton` (with `triton.language`), `math`, `typing`, `functools`
and `torch`; whose `@triton.jit` functions (or Gluon's `@gluon.jit`) do all the arithmetic; and whose host code
(`launch`, its helpers and the module-level statements) uses torch only for metadata -- shapes, strides, `numel`, dtype and device,
`data_ptr` for alignment, allocation-free views -- and triton only to launch (`cdiv`, `next_power_of_2`,
autotune configs). Everything else a candidate might do is either a rule below or unnecessary for a kernel.

How names are seen. Every name is resolved to a qualified name through `import`/`from ... import`/`as`,
plain assignments (`F = torch.nn.functional`, `ln = F.layer_norm`) and `getattr` with a literal attribute
name, so aliases do not hide a call; `getattr` with a computed name is itself `dynamic-code`. Which tensors a
host expression touches is inferred from `launch`'s positional parameters (the op's inputs and outputs)
through assignments and calls of the module's own helpers; a method that only tensors have (`copy_`, `float`,
`sum`, ...) is a hit on any receiver that is not a known module.

Decisions.
- `functools.lru_cache`/`functools.cache` are allowed only on pure compile-time helpers: not `launch`, never
  handed a tensor, launching no kernel and touching no torch. Anything else is `global-state`: a tensor hashes
  by identity, so a cache around tensor arguments is a result cache keyed by `id`.
- Allocations (`torch.empty`, `empty_like`, ...) count as torch on the hot path: a scratch buffer is also how
  freed memory still holding an answer is picked up, and the op's outputs are already allocated by the harness.
- `if __name__ == "__main__":` blocks are not analysed: the worker imports candidates under another module name,
  so they never run (rebinding `__name__` is itself a `monkey-patch` hit).
- A source that does not parse has no hits: importing it fails in the worker, which reports a COMPILE_ERROR
  with the log.
- Precision is judged against the dtypes the candidate will run on (`dtypes`, default: all the spec's): a cast
  to fp16 is a downcast whenever one of them is not fp16, bf16 likewise, fp8 always.

Layout: `source` (the parsed candidate: scopes, jit functions and the walks the rules share), with `names` (name
resolution and classification) and `infer` (which host expressions are tensors); `tables` (the name tables);
`registry` (rule ids, `Rule`, `@rule`, the reporting priority); one module per rule family: `compute`
(library-op, torch-on-hot-path, try-except), `output` (output-aliasing, precision-downcast), `timing`
(new-stream, timing-access), `process` (thread-or-process, file-or-env-access), `reflection` (monkey-patch,
introspection, dynamic-code, disallowed-import) and `state` (global-state).
"""

from __future__ import annotations

from typing import Iterable

from ....base import pyast
from ....base.records import DType, OpSpec, StaticRuleHit
from . import allow, compute, output, process, reflection, state, timing  # noqa: F401 - each registers its rules
from .registry import (ALIAS, ALLOW, DYN, FILE, GLOBAL, HOT, IMPORT, INTRO, LIB, MONKEY, PREC, PRIORITY, PROC, RULES, STREAM,
                       TIMING, TRY, Rule, rule)
from .source import _Module
from .tables import ALLOWED_IMPORT_ROOTS

RuleHit = StaticRuleHit  # the name the issue uses; `records.RuleHit` is the Nsight Compute rule record

__all__ = ["ALIAS", "ALLOW", "ALLOWED_IMPORT_ROOTS", "DYN", "FILE", "GLOBAL", "HOT", "IMPORT", "INTRO", "LIB", "MONKEY",
           "PREC", "PRIORITY", "PROC", "RULES", "RULE_BY_ID", "RULE_IDS", "STREAM", "TIMING", "TRY", "Rule", "RuleHit",
           "StaticRuleHit", "check_source", "rule"]


def check_source(source: str, spec: OpSpec, *, dtypes: Iterable[DType | str] | None = None) -> list[StaticRuleHit]:
    """Every static rule the source breaks, one hit per rule and line, in source order.

    `dtypes`: the element types the candidate will run on (default: all of the spec's); they decide what counts
    as a precision downcast. A source that does not parse has no hits (its import fails in the worker).
    """
    try:
        tree = pyast.parse(source)   # one parse at a time (kernelloop.base.pyast): the build stage checks from threads
    except (SyntaxError, ValueError):
        return []
    try:
        m = _Module(source, tree, spec, dtypes if dtypes is not None else spec.dtypes)
        found = [(order, r, node, detail) for order, r in enumerate(RULES) for node, detail in r.check(m)]
    except RecursionError:
        return [StaticRuleHit(rule=DYN, line=1, col=0, snippet=(source.splitlines() or [""])[0].strip()[:200],
                              rationale=RULE_BY_ID[DYN].rationale, detail="source too deeply nested to analyse")]
    hits, seen = [], set()
    for order, r, node, detail in sorted(found, key=lambda h: (getattr(h[2], "lineno", 1), h[0],
                                                                 getattr(h[2], "col_offset", 0))):
        line = getattr(node, "lineno", 1)
        if (r.id, line) in seen:
            continue
        seen.add((r.id, line))
        snippet = m.lines[line - 1].strip()[:200] if 0 < line <= len(m.lines) else ""
        hits.append(StaticRuleHit(rule=r.id, line=line, col=getattr(node, "col_offset", 0), snippet=snippet,
                                  rationale=r.rationale, detail=detail))
    return hits


RULE_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
RULE_IDS: tuple[str, ...] = tuple(RULE_BY_ID)

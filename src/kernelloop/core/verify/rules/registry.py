"""The rule registry: rule ids, `Rule`, and the `@rule` decorator the family modules register their checks with.

`RULES` is kept in reporting priority (`PRIORITY`, the more specific rule first), whatever order the family
modules are imported in: when two rules hit the same line, the earlier one is reported first.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Iterable

LIB = "library-op"
HOT = "torch-on-hot-path"
TRY = "try-except"
STREAM = "new-stream"
PROC = "thread-or-process"
MONKEY = "monkey-patch"
FILE = "file-or-env-access"
PREC = "precision-downcast"
DYN = "dynamic-code"
INTRO = "introspection"
GLOBAL = "global-state"
TIMING = "timing-access"
ALIAS = "output-aliasing"
IMPORT = "disallowed-import"
ALLOW = "not-allowed"

# Reporting priority, the more specific rule first (`check_source` orders a line's hits by it).
PRIORITY: tuple[str, ...] = (LIB, ALIAS, STREAM, PROC, TIMING, MONKEY, INTRO, FILE, DYN, PREC, GLOBAL, TRY, IMPORT, HOT,
                             ALLOW)


@dataclass(frozen=True)
class Rule:
    """One static rule: an id, the attack it closes, and a check yielding (node, what matched). The check takes the
    parsed source (source.py's `_Module`, not imported here: source.py imports this registry)."""

    id: str
    rationale: str
    check: Callable[[Any], Iterable[tuple[ast.AST, str]]]


RULES: list[Rule] = []  # in reporting priority: the more specific rule first


def rule(rule_id: str, rationale: str):
    def register(fn: Callable[[Any], Iterable[tuple[ast.AST, str]]]):
        RULES.append(Rule(rule_id, " ".join(rationale.split()), fn))
        RULES.sort(key=lambda r: PRIORITY.index(r.id))   # an id missing from PRIORITY fails here, at import
        return fn
    return register

"""`ast.parse` under one process-wide lock.

CPython 3.11 converts a parsed tree to Python objects with interpreter-wide recursion bookkeeping. Two threads
parsing at once (the build stage's threads, the pipeline's) can fail with
`SystemError: AST constructor recursion depth mismatch`. Seen once when the static rules checked two candidates
concurrently. Every parse in kernelloop goes through here, so no two overlap.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec", filename: str = "<unknown>") -> ast.AST:
    """`ast.parse(source, filename, mode)`, one parse at a time in this process."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)

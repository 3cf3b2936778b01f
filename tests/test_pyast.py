"""kernelloop.base.pyast: `ast.parse` one at a time in a process (CPython 3.11 fails concurrent AST builds from threads
with "AST constructor recursion depth mismatch")."""

import ast
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelloop.base import pyast
from kernelloop.base.builtin import ops_dir


def test_parses_like_ast_parse_in_both_modes():
    src = (ops_dir() / "attention" / "kernel.py").read_text()
    assert ast.dump(pyast.parse(src)) == ast.dump(ast.parse(src))
    assert ast.dump(pyast.parse("M * N + 1", mode="eval")) == ast.dump(ast.parse("M * N + 1", mode="eval"))
    with pytest.raises(SyntaxError):
        pyast.parse("def (:", filename="bad.py")


def test_concurrent_parses_from_threads_all_return_whole_trees():
    sources = [p.read_text() for p in sorted(ops_dir().glob("*/kernel.py"))]
    expected = [ast.dump(ast.parse(s)) for s in sources]
    start = threading.Barrier(4)

    def one(i):
        start.wait()
        return [ast.dump(pyast.parse(s)) for s in sources]

    with ThreadPoolExecutor(4) as pool:
        assert all(r == expected for r in pool.map(one, range(4)))


def test_the_lock_is_held_while_parsing():
    """A parse waits while another holds the lock (so two never overlap)."""
    got = []
    with pyast._LOCK:
        t = threading.Thread(target=lambda: got.append(pyast.parse("x = 1")))
        t.start()
        t.join(0.2)
        assert t.is_alive() and not got
    t.join(5)
    assert len(got) == 1

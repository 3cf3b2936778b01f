"""Shared by tests/fuzz and benchmarks/fuzz_loaders.py: input strategies (mutations of real files: truncations, wrong
types, missing keys, huge numbers, unicode, NaN, invalid UTF-8) and the one property every loader must hold.

The property (`expect`): a loader given any input either returns, or raises its documented error type with a
non-empty message. Any other exception propagates, so hypothesis reports it with the input that caused it.
"""

from __future__ import annotations

import json
import math
from collections import Counter

from hypothesis import strategies as st

TRIED: Counter = Counter()
"""Inputs tried per loader in this process (what benchmarks/fuzz_loaders.py prints)."""

OUTCOMES: Counter = Counter()
"""(loader, outcome) -> count: 'ok' or the error type's name."""


def expect(loader: str, allowed: tuple[type[BaseException], ...], fn, *args, **kwargs):
    """Call `fn`; return (result, None) or (None, the allowed error). Anything else escapes."""
    TRIED[loader] += 1
    try:
        result = fn(*args, **kwargs)
    except allowed as e:
        assert str(e).strip(), f"{loader}: {type(e).__name__} raised without a message"
        OUTCOMES[(loader, type(e).__name__)] += 1
        return None, e
    OUTCOMES[(loader, "ok")] += 1
    return result, None


# -- values ------------------------------------------------------------------------------------------------------

KEYS = st.one_of(st.sampled_from(["name", "op", "axes", "M", "N", "dtype", "shape", "inputs", "outputs", "files",
                                  "digest", "entries", "guard", "lo", "hi", "kernel", "reference", "templates",
                                  "workload", "config", "source", "patch", "type", "value", "shapes", "calls",
                                  "", "ü", "名前", "a b", "\x00", "__proto__"]),
                 st.text(max_size=6))

TOKENS = st.sampled_from([
    "fp16", "bf16", "fp32", "float16", "bfloat16", "float8_e4m3fn", "int32", "op", "M", "N", "K", "M * N", "1 +",
    "(", "M ** 99", "cdiv(M, 0)", "1 / 0", "min()", "__import__('os')", "x.y", "lambda: 1", "[1]", "1 if M else",
    "../../etc/passwd", "/etc/passwd", "kernels/x.py", "reference.py", "kernel.py", ".", "..", "", " ", "nan", "inf",
    "1e309", "-0", "é", "\u202e", "\U0001f600", "\x00", "a\nb", "def run(x):\n    return x\n",
    "def reference(*a, **k):\n    return a[0]\n", "def launch(*a, **k):\n    pass\n", "interpret", "sm_90", "e0",
    "run", "main.py::run", "triton", "python", "var", "const", "random", "scalar", "safetensors", "PASSED",
    "up", "down", "same", "latency_us", "sol_dram_pct", "activation", "weight", "bias"])

INTS = st.one_of(st.integers(-3, 300), st.sampled_from([2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -2**63,
                                                       10**30, -10**30, 10**400]))
FLOATS = st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-320, 1e308]))
ATOMS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TOKENS, st.text(max_size=12))
EXPRESSIONS = st.recursive(
    st.one_of(st.sampled_from(["M", "N", "K", "elem", "BLOCK_N", "num_warps", "ROWS", "x"]),
              st.sampled_from(["0", "1", "-1", "2", "3", "2.0", "0.5", "1e308", "300", "10 ** 30"])),
    lambda c: st.one_of(
        st.tuples(c, st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<", "<=", "==", "!=", " and ", " or "]),
                  c).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["cdiv", "min", "max"]), c, c).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        st.tuples(st.sampled_from(["sqrt_", "next_pow2", "-", "not "]), c).map(
            lambda t: f"{t[0]}({t[1]})" if t[0][0].isalpha() and t[0] != "not " else f"({t[0]}{t[1]})"),
        st.tuples(c, c, c).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})")),
    max_leaves=8)
"""Spec expressions (constraints, formulas): mostly valid syntax, any arithmetic -- zero divisors, overflow, complex
roots, power towers, unknown names."""

VALUES = st.recursive(ATOMS, lambda c: st.lists(c, max_size=3) | st.dictionaries(KEYS, c, max_size=3), max_leaves=6)


def _pick(data, seq, label):
    return seq[data.draw(st.integers(0, len(seq) - 1), label=label)]


def mutate_once(data, v, depth: int = 0):
    """One structural change somewhere in `v`: descend into a child, or change this node."""
    if isinstance(v, dict) and v and depth < 8 and data.draw(st.integers(0, 3)) > 0:
        k = _pick(data, list(v), "key")
        return {**v, k: mutate_once(data, v[k], depth + 1)}
    if isinstance(v, list) and v and depth < 8 and data.draw(st.integers(0, 3)) > 0:
        i = data.draw(st.integers(0, len(v) - 1))
        return [*v[:i], mutate_once(data, v[i], depth + 1), *v[i + 1:]]
    op = data.draw(st.integers(0, 5), label="op")
    if op == 0 or not isinstance(v, (dict, list, str, int, float)):
        return data.draw(VALUES, label="replacement")
    if isinstance(v, dict):
        if op == 1 and v:                                   # a key missing
            k = _pick(data, list(v), "drop")
            return {kk: vv for kk, vv in v.items() if kk != k}
        if op == 2:                                         # an unknown key
            return {**v, data.draw(KEYS): data.draw(VALUES)}
        if op == 3 and v:                                   # a key renamed
            k = _pick(data, list(v), "rename")
            return {(data.draw(KEYS) if kk == k else kk): vv for kk, vv in v.items()}
        return {} if op == 4 else [v]
    if isinstance(v, list):
        if op == 1 and v:
            i = data.draw(st.integers(0, len(v) - 1))
            return v[:i] + v[i + 1:]
        if op == 2:
            return v + [data.draw(VALUES)]
        if op == 3 and v:
            return v + v                                    # duplicates
        return [] if op == 4 else {"0": v}
    if isinstance(v, str):
        if op == 1:
            return v[:data.draw(st.integers(0, len(v)))]
        if op == 2:
            return v + data.draw(st.text(min_size=1, max_size=4))
        return data.draw(TOKENS) if op == 3 else str(len(v)) if op == 4 else v * 3
    if isinstance(v, bool):
        return not v if op < 3 else str(v).lower()
    return data.draw(st.one_of(INTS, FLOATS)) if op < 3 else str(v) if op == 3 else -v if op == 4 else [v]


def mutate(data, v, most: int = 4):
    for _ in range(data.draw(st.integers(1, most), label="mutations")):
        v = mutate_once(data, v)
    return v


def mutate_bytes(data, raw: bytes) -> bytes:
    """Text-level damage: truncation, a cut range, inserted bytes (invalid UTF-8 among them), a flipped byte."""
    for _ in range(data.draw(st.integers(1, 3))):
        n = len(raw)
        op = data.draw(st.integers(0, 4), label="byte op")
        i = data.draw(st.integers(0, n))
        if op == 0:
            raw = raw[:i]
        elif op == 1:
            raw = raw[:i] + raw[min(n, i + data.draw(st.integers(1, 40))):]
        elif op == 2:
            ins = data.draw(st.one_of(st.binary(min_size=1, max_size=8),
                                      st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\"", b"{", b"}", b"[", b"]", b",",
                                                       b"=", b"\n", b"[[x]]\n", b"NaN", b"-Infinity", b"1e999"]),
                                      st.text(min_size=1, max_size=6).map(lambda s: s.encode("utf-8"))))
            raw = raw[:i] + ins + raw[i:]
        elif op == 3 and n:
            j = min(i, n - 1)
            raw = raw[:j] + bytes([raw[j] ^ (1 << data.draw(st.integers(0, 7)))]) + raw[j + 1:]
        else:
            raw = raw[:i] + raw[i:] * 2
    return raw


def dumps_json(v) -> str:
    """JSON as Python writes it (NaN and Infinity included, which json.loads reads back)."""
    return json.dumps(v, ensure_ascii=False)


def to_toml(v) -> str:
    """TOML for a mutated value: every top-level key as `key = <inline value>`; None (no TOML form) dropped."""
    from kernelloop.deliver.interop import toml_out as T

    def clean(x):
        if isinstance(x, dict):
            return {str(k): clean(y) for k, y in x.items() if y is not None}
        if isinstance(x, list):
            return [clean(y) for y in x if y is not None]
        return x
    v = clean(v)
    if not isinstance(v, dict):
        v = {"value": v} if v is not None else {}
    return "\n".join(f"{T.key(k)} = {T.value(x)}" for k, x in v.items()) + "\n"


def encoded(data, value, *, as_toml: bool = False) -> bytes:
    """A mutated value written as text, sometimes damaged at the byte level as well."""
    text = to_toml(value) if as_toml else dumps_json(value)
    raw = text.encode("utf-8", "surrogatepass")
    return mutate_bytes(data, raw) if data.draw(st.integers(0, 3), label="damage bytes") == 0 else raw

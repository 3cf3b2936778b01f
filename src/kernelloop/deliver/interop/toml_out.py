"""A small TOML writer for the files import writes (spec.toml, workloads.toml): values, tables, arrays of tables.

Only what those files need; `tomllib` reads back exactly the data written (checked after every write)."""

from __future__ import annotations

import json
import math
import re

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def key(k: str) -> str:
    return k if _BARE.match(k) else string(k)


def string(s: str) -> str:
    # JSON's escapes (\" \\ \n \t \uXXXX) are TOML's; DEL must be escaped in TOML, not in JSON.
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"no TOML form for {type(v).__name__}")


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")   # not allowed in a TOML comment (tab is)


def _visible(m: re.Match) -> str:
    return "\\x%02x" % ord(m.group())


def comment(text: str) -> list[str]:
    """`text` as comment lines (every line prefixed, none empty; control characters written as \\xNN)."""
    return [f"# {_CONTROL.sub(_visible, line)}".rstrip() for line in text.splitlines() or [""]]


def assignments(d: dict) -> list[str]:
    return [f"{key(k)} = {value(v)}" for k, v in d.items()]

"""Reader of Kernel Tuner cache files (`tune_kernel(cache=...)`, the benchmark_hub brute-forced spaces).

Top level: `tune_params_keys` (parameter order of the cache keys), `tune_params`, `objective`, `device_name`,
`kernel_name`, `problem_size` and `cache`: comma-joined values -> a record with every parameter and the
objective. A configuration that failed carries an error string instead of a number ("CompilationFailedConfig",
"RuntimeFailedConfig", "ErrorConfig"); "InvalidConfig" marks one the tuner's restrictions exclude, so it is not
part of the space at all. An evaluation's cost in GPU seconds is its compile, verification and benchmark times
(milliseconds in the cache) summed, where every entry has them. Kernel Tuner leaves a cache "open" (no closing braces, maybe a trailing comma) while
it runs; such a file is read as if closed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ...base.compressed import SUFFIXES, read_bytes
from .space import RecordedSpace

INVALID = "InvalidConfig"
ERRORS = {"ErrorConfig", INVALID, "CompilationFailedConfig", "RuntimeFailedConfig"}
COST_FIELDS = ("compile_time", "verification_time", "benchmark_time")   # milliseconds; their sum is a GPU cost


def read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8")


def parse_cache_text(text: str) -> dict:
    """JSON of a cache file; one left open is closed by Kernel Tuner's rule (drop a trailing comma, add '}}')."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        text = text.strip()
        if text.endswith(","):
            text = text[:-1]
        return json.loads(text + "}\n}")


def is_kernel_tuner_cache(data: dict) -> bool:
    return isinstance(data, dict) and "cache" in data and "tune_params_keys" in data


def read_kernel_tuner_cache(path: str | Path, objective: str | None = None, name: str | None = None) -> RecordedSpace:
    """A RecordedSpace from a Kernel Tuner cache file. `objective` defaults to the cache's own (usually 'time')."""
    path = Path(path)
    data = parse_cache_text(read_text(path))
    return from_kernel_tuner_dict(data, objective=objective, name=name or _stem(path))


def from_kernel_tuner_dict(data: dict, objective: str | None = None, name: str = "space") -> RecordedSpace:
    if not is_kernel_tuner_cache(data):
        raise ValueError(f"{name}: not a Kernel Tuner cache (needs 'cache' and 'tune_params_keys')")
    keys = list(data["tune_params_keys"])
    objective = objective or data.get("objective") or "time"
    if not isinstance(objective, str):
        raise ValueError(f"{name}: only a single objective is supported, got {objective!r}")
    configs, values, statuses, costs = [], [], [], []
    for cache_key, rec in data["cache"].items():
        try:
            cfg = {k: rec[k] for k in keys}
        except KeyError as e:
            raise ValueError(f"{name}: cache entry {cache_key!r} lacks parameter {e.args[0]!r}") from None
        err = next((v for v in rec.values() if isinstance(v, str) and v in ERRORS), None)
        if err == INVALID:
            continue
        parts = [rec.get(k) for k in COST_FIELDS]
        costs.append(sum(parts) / 1000.0 if all(isinstance(x, (int, float)) for x in parts) else None)
        val = rec.get(objective)
        if err is None and isinstance(val, (int, float)) and not isinstance(val, bool) and math.isfinite(val):
            configs.append(cfg)
            values.append(float(val))
            statuses.append("ok")
        else:
            configs.append(cfg)
            values.append(None)
            statuses.append(err or (val if isinstance(val, str) else "missing objective"))
    meta = {k: data.get(k) for k in ("device_name", "kernel_name", "problem_size") if k in data}
    meta["format"] = "kernel_tuner_cache"
    if any(c is None for c in costs):
        costs = []
    return RecordedSpace(name, configs, values, statuses, objective, keys, meta, costs)


def _stem(path: Path) -> str:
    n = path.name
    for suffix in (*SUFFIXES, ".json"):
        if n.endswith(suffix):
            n = n[: -len(suffix)]
    return n

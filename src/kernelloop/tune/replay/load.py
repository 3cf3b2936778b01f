"""Open a recorded space whatever its format: kernelloop's own or a Kernel Tuner cache (compressed or not)."""

from __future__ import annotations

from pathlib import Path

from .kt_cache import from_kernel_tuner_dict, is_kernel_tuner_cache, parse_cache_text, read_text, _stem
from .space import RecordedSpace
from .space_file import from_space_document, is_space_document, validate


def load_space(path: str | Path, workload: str | None = None, valid_only: bool = False,
               min_speedup: float | None = None, objective: str | None = None) -> RecordedSpace:
    """Read `path`; `valid_only` drops failed configurations (as Kernel Tuner's tune_cache does), `workload`
    selects one workload of a multi-workload kernelloop space, `objective` picks a Kernel Tuner cache's key."""
    path = Path(path)
    data = _read(path)
    if is_space_document(data):
        space = from_space_document(data, workload=workload, min_speedup=min_speedup)
    else:
        space = from_kernel_tuner_dict(data, objective=objective, name=_stem(path))
    space.meta["path"] = str(path)
    return space.valid_only() if valid_only else space


def load_workload_spaces(path: str | Path) -> list[RecordedSpace]:
    """One RecordedSpace per recorded workload of `path`: each workload of a kernelloop space file, or the one
    space of a Kernel Tuner cache (its own objective)."""
    path = Path(path)
    data = _read(path)
    if is_space_document(data):
        spaces = [from_space_document(data, workload=w["id"]) for w in data["workloads"]]
    else:
        spaces = [from_kernel_tuner_dict(data, name=_stem(path))]
    for space in spaces:
        space.meta["path"] = str(path)
    return spaces


def _read(path: Path) -> dict:
    """The JSON of a kernelloop space file (validated) or of a Kernel Tuner cache."""
    if not path.is_file():
        raise FileNotFoundError(f"no recorded space at {path}")
    data = parse_cache_text(read_text(path))
    if is_space_document(data):
        validate(data, str(path))
    elif not is_kernel_tuner_cache(data):
        raise ValueError(f"{path}: neither a kernelloop space file nor a Kernel Tuner cache")
    return data


def merge_spaces(spaces: list[RecordedSpace]) -> RecordedSpace:
    """One space from the shards of a recording (`kernelloop record --shard I/N`), each loaded for one workload:
    their configurations side by side. Refused: shards of different recordings (op, device, timing policy,
    objective), a set of shards that is not 0..N-1 of one N, a configuration in two shards, and spaces whose
    values are speed-ups over their own baseline (a multi-workload objective: load each shard for one workload).
    The merged space is complete when every shard is."""
    if not spaces:
        raise ValueError("no spaces to merge")
    if len(spaces) == 1:
        return spaces[0]
    if len({s.objective for s in spaces}) > 1:
        raise ValueError(f"shards with different objectives: {sorted({s.objective for s in spaces})}")
    if any("baseline" in s.meta for s in spaces):
        raise ValueError("these spaces hold speed-ups over each shard's own baseline (a multi-workload objective): "
                         "load every shard for one workload (load_space(path, workload=...)) and merge those")
    for field in ("op", "device", "timing_policy", "workload"):
        values = {repr(s.meta.get(field)) for s in spaces}
        if len(values) > 1:
            raise ValueError(f"the shards differ in {field!r}: not one recording")
    parts = [s.meta.get("shard") for s in spaces]
    if all(p is not None for p in parts):
        ns = {p[1] for p in parts}
        if len(ns) != 1 or sorted(p[0] for p in parts) != list(range(ns.pop())):
            raise ValueError(f"shards {[tuple(p) for p in parts]} are not the shards 0..N-1 of one recording")
    elif any(p is not None for p in parts):
        raise ValueError("a sharded space merged with an unsharded one")
    configs, values, statuses, seen = [], [], [], set()
    for s in spaces:
        for c, v, st in zip(s.configs, s.values, s.statuses):
            key = tuple(sorted((k, str(x)) for k, x in c.items()))
            if key in seen:
                raise ValueError(f"configuration {c} is in more than one shard")
            seen.add(key)
            configs.append(c)
            values.append(v)
            statuses.append(st)
    first = spaces[0]
    meta = {**first.meta, "shards": [s.meta.get("path") for s in spaces],
            "complete": all(s.meta.get("complete", True) for s in spaces)}
    meta.pop("shard", None)
    if all(s.meta.get("planned") is not None for s in spaces):
        meta["planned"] = sum(s.meta["planned"] for s in spaces)
    params = sorted({p for s in spaces for p in s.params})
    return RecordedSpace(name=first.name, configs=configs, values=values, statuses=statuses,
                         objective=first.objective, params=params, meta=meta)

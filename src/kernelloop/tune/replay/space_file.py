"""kernelloop's own recorded-space format (`kernelloop record` writes it; `kernelloop replay` reads it).

JSON, optionally compressed (by the file name ending in .xz or .gz):

    {"format": "kernelloop-space/1", "name": ..., "op": ..., "objective": "kernel_us",
     "device": {...}, "environment": {...}, "timing_policy": {...}, "manifest_hash": ...,
     "params": [parameter names],
     "workloads": [{"id": ..., "label": ..., "axes": {...}, "dtype": ..., "weight": 1.0}, ...],
     "records": [{"config": {...},
                  "results": {workload_id: {"value": µs | null, "status": "PASSED" | "COMPILE_ERROR" | ...,
                                            "ci": [lo, hi] | null, "cost_s": GPU seconds (optional)}}}, ...]}

A space measured on several workloads replays either one workload (`workload=`) or all of them through a
MultiWorkloadObjective (weighted geometric-mean speed-up over a per-workload baseline, failures and
worst-shape regressions counting as failed).
"""

from __future__ import annotations

import json
from pathlib import Path

from ...base.compressed import compress, read_bytes, suffix_of
from ..search.encoding import config_key
from ..search.objectives import MultiWorkloadObjective
from .space import RecordedSpace

FORMAT = "kernelloop-space/1"


def write_space_file(path: str | Path, doc: dict) -> Path:
    """Write a space document (validated) as JSON, compressed when the name ends in .xz or .gz."""
    validate(doc, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=None, separators=(",", ":"), allow_nan=False)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(compress(text.encode("utf-8"), suffix_of(path) or ""))
    tmp.replace(path)
    return path


def validate(doc: dict, where: str = "space") -> None:
    """Raise ValueError naming the field when a document does not follow the format."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"{where}: format must be {FORMAT!r}, got {doc.get('format')!r}")
    for key in ("name", "objective", "workloads", "records"):
        if key not in doc:
            raise ValueError(f"{where}: missing field {key!r}")
    wids = [w.get("id") for w in doc["workloads"]]
    if not wids or any(not isinstance(w, str) for w in wids) or len(set(wids)) != len(wids):
        raise ValueError(f"{where}: workloads need unique string ids")
    seen = set()
    for i, rec in enumerate(doc["records"]):
        if not isinstance(rec.get("config"), dict) or not isinstance(rec.get("results"), dict):
            raise ValueError(f"{where}: records[{i}] needs 'config' (object) and 'results' (object)")
        key = config_key(rec["config"])
        if key in seen:
            raise ValueError(f"{where}: records[{i}] repeats configuration {key}")
        seen.add(key)
        for wid, res in rec["results"].items():
            if wid not in wids:
                raise ValueError(f"{where}: records[{i}].results names unknown workload {wid!r}")
            v = res.get("value")
            if v is not None and not (isinstance(v, (int, float)) and v > 0):
                raise ValueError(f"{where}: records[{i}].results[{wid!r}].value must be a positive number or null")


def read_space_document(path: str | Path) -> dict:
    doc = json.loads(read_bytes(path).decode("utf-8"))
    validate(doc, str(path))
    return doc


def is_space_document(data: dict) -> bool:
    return isinstance(data, dict) and data.get("format") == FORMAT


def from_space_document(doc: dict, workload: str | None = None, min_speedup: float | None = None) -> RecordedSpace:
    """A RecordedSpace for one workload (by id or label), or for all of them through a MultiWorkloadObjective."""
    wls = doc["workloads"]
    by_name = {w["id"]: w["id"] for w in wls} | {w.get("label"): w["id"] for w in wls if w.get("label")}
    meta = {k: doc.get(k) for k in ("op", "device", "environment", "timing_policy", "manifest_hash", "complete",
                                    "planned", "shard") if k in doc}
    meta["format"] = FORMAT
    configs = [rec["config"] for rec in doc["records"]]
    params = doc.get("params") or sorted({k for c in configs for k in c})
    if workload is not None or len(wls) == 1:
        wid = wls[0]["id"] if workload is None else by_name.get(workload)
        if wid is None:
            raise ValueError(f"no workload {workload!r} in {doc['name']}; have {sorted(by_name)}")
        values, statuses, costs = [], [], []
        for rec in doc["records"]:
            res = rec["results"].get(wid, {"value": None, "status": "not measured"})
            values.append(res.get("value"))
            statuses.append("ok" if res.get("value") is not None else res.get("status", "failed"))
            costs.append(res.get("cost_s"))
        mine = next(w for w in wls if w["id"] == wid)
        shape = {k: mine[k] for k in ("axes", "dtype") if mine.get(k)}   # the transfer prior checks them
        return RecordedSpace(f"{doc['name']}:{wid}", configs, values, statuses, doc["objective"], params,
                             {**meta, "workload": wid, **shape},
                             costs if all(isinstance(c, (int, float)) for c in costs) else [])
    baseline = space_baseline(doc)
    weights = {w["id"]: float(w.get("weight", 1.0)) for w in wls}
    objective = MultiWorkloadObjective(baseline, weights, min_speedup)
    values, statuses = [], []
    for rec in doc["records"]:
        times = {wid: rec["results"].get(wid, {}).get("value") for wid in baseline}
        v = objective(times)
        values.append(v)
        statuses.append("ok" if v is not None else "failed or regressed on some workload")
    return RecordedSpace(f"{doc['name']}:geomean", configs, values, statuses, "1/geomean speed-up", params,
                         {**meta, "workloads": [w["id"] for w in wls], "baseline": baseline,
                          "min_speedup": min_speedup})


def space_baseline(doc: dict) -> dict[str, float]:
    """The per-workload baseline: the document's own `baseline` times if given, else the median measured time
    of each workload over the space (so a speed-up of 1 means 'as fast as a typical configuration')."""
    if doc.get("baseline"):
        return {k: float(v) for k, v in doc["baseline"].items()}
    out, empty = {}, []
    for w in doc["workloads"]:
        vals = sorted(r["results"][w["id"]]["value"] for r in doc["records"]
                      if r["results"].get(w["id"], {}).get("value") is not None)
        if vals:
            out[w["id"]] = vals[len(vals) // 2]
        else:
            empty.append(w.get("label") or w["id"])
    if empty:
        measured = [w.get("label") or w["id"] for w in doc["workloads"] if w["id"] in out]
        many = len(empty) > 1
        raise ValueError(f"{'workloads' if many else 'workload'} {', '.join(empty)}: no configuration of the "
                         f"recording was measured on {'them' if many else 'it'}"
                         + (f"; one measured workload at a time: --workload {' | '.join(measured)}" if measured
                            else ""))
    return out

"""The verification battery of one trial: which cases run, on which shapes, seeds and value distributions.

Every draw mixes the run's secret (derived from the run key, which no proposer can read: execute/keys.py), the
workload and the candidate, so the cases of one candidate say nothing about the next one's:
- `checks` cases on the workload itself, each from another value distribution, the first one run 3 times
  (bitwise determinism);
- held-out shapes the proposer is never shown: each held-out axis (the spec's `heldout_axes`, by default the
  first axis of the first input) at 1 and at an odd value below the workload's.

A case is a dict: workload, seed, distribution, repeats, index (its check number) and `heldout` (None, or its
kind, the axes it changed and its class: what a proposer may be told, e.g. "a held-out smaller M (rows)").
"""

from __future__ import annotations

import hashlib

from ..records import OpSpec, Workload

DETERMINISM_RUNS = 3


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts (run secret, workload id, candidate id, check index)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def primary_axes(spec: OpSpec) -> list[str]:
    """The axes probed at 1 and at an odd value below the workload's."""
    return list(spec.heldout_axes or [spec.inputs[0].shape[0]])


def axis_phrase(spec: OpSpec, ax: str) -> str:
    d = spec.axes[ax].description
    return f"{ax} ({d})" if d else ax


def heldout_class(spec: OpSpec, base: Workload, held: Workload) -> str:
    """What a proposer may learn of a held-out case: which axes moved and in which direction, never to what."""
    parts = []
    for ax, v in held.axes.items():
        b = base.axes[ax]
        if v != b:
            parts.append(f"{'smaller' if v < b else 'larger'} {axis_phrase(spec, ax)}")
    return "a held-out " + ", ".join(parts) if parts else "a held-out case"


def _with(workload: Workload, axes: dict[str, int]) -> Workload:
    return workload.model_copy(update={"axes": {**workload.axes, **axes}})


def primary_heldout(spec: OpSpec, secret: str, workload: Workload, candidate_id: str) -> list[Workload]:
    """Each primary held-out axis at 1 and at an odd value in [1, min(v, 64)), drawn per candidate."""
    out = []
    for ax in primary_axes(spec):
        v = workload.axes[ax]
        odd = 1 + 2 * (derive_seed(secret, "heldout", workload.id, candidate_id, ax) % max(1, min(v, 64) // 2))
        for value in sorted({1, odd} - {v}):
            if value >= spec.axes[ax].min:
                out.append(_with(workload, {ax: value}))
    return out


def heldout_workloads(spec: OpSpec, secret: str, workload: Workload, candidate_id: str) -> list[tuple[str, Workload]]:
    """(kind, workload) of every held-out shape of a candidate on a workload."""
    return [("primary", w) for w in primary_heldout(spec, secret, workload, candidate_id)]


def cases(spec: OpSpec, secret: str, checks: int, candidate_id: str, workload: Workload) -> list[dict]:
    dists = spec.inputs_policy.distributions
    offset = derive_seed(secret, "dist", workload.id, candidate_id) % len(dists)
    out = []
    for k in range(checks):
        out.append({"workload": workload, "seed": derive_seed(secret, workload.id, candidate_id, k),
                    "distribution": dists[(offset + k) % len(dists)],
                    "repeats": DETERMINISM_RUNS if k == 0 else 1, "heldout": None})
    for j, (kind, held) in enumerate(heldout_workloads(spec, secret, workload, candidate_id)):
        out.append({"workload": held, "seed": derive_seed(secret, held.id, candidate_id, "h", j),
                    "distribution": dists[(offset + j) % len(dists)], "repeats": 1,
                    "heldout": {"kind": kind, "axes": sorted(a for a in held.axes if held.axes[a] != workload.axes[a]),
                                "class": heldout_class(spec, workload, held)}})
    for i, c in enumerate(out):
        c["index"] = i
    return out


def case_label(case: dict) -> str:
    """The user-facing name of a case: shape, check number, distribution, seed, and whether it was held out."""
    w: Workload = case["workload"]
    label = f"{w.label} check {case.get('index', '?')} seed={case['seed']} distribution={case['distribution']}"
    held = case.get("heldout")
    return label + (f" (held-out: {held['class']})" if held else "")


def case_record(case: dict) -> dict:
    """A case as archived with a failure: everything the user needs to reproduce it."""
    w: Workload = case["workload"]
    held = case.get("heldout")
    return {"index": case.get("index"), "kind": "held-out" if held else "visible", "workload": w.label,
            "workload_id": w.id, "axes": dict(w.axes), "dtype": w.dtype.value, "distribution": case["distribution"],
            "seed": case["seed"], "heldout": held}


__all__ = ["DETERMINISM_RUNS", "case_label", "case_record", "cases", "derive_seed", "heldout_class",
           "heldout_workloads", "primary_axes", "primary_heldout"]

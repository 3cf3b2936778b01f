"""The verification battery of one trial: which cases run, on which shapes, seeds and value distributions.

Every draw mixes the run's secret (derived from the run key, which no proposer can read: core/sandbox/keys.py), the
workload and the candidate, so the cases of one candidate say nothing about the next one's:
- `checks` cases on the workload itself, each from another value distribution, the first one run 3 times
  (bitwise determinism), and one more for each of the spec's `inputs_policy.always` distributions the cycle missed
  (the statistics-aware draws of the normalisation ops: a skipped mean or max subtraction fails on every trial);
- held-out shapes the proposer is never shown: each primary held-out axis (the spec's `heldout_axes`, by default
  the first axis of the first input) at 1 and at an odd value below the workload's; then one case with every other
  free axis (all but the spec's `fixed_axes`) at a small, odd or non-power-of-two value below the workload's, and
  one with every free axis beyond the workload's (for a candidate that is not a template's own source, in the
  power-of-two bucket above the workload's, so a kernel correct only up to the visible sizes fails; for a
  template's own configuration up to +25 %, where its pruning keeps the shape; in the interpreter the shape's
  size is capped at INTERPRET_GROWTH times the workload's, core/execute/evaluate.py), each value
  inside the axis's [min, max] and the op's domain (the axis-only constraints every template states, e.g.
  `H % HKV == 0`; for a template's own configuration, everything pruning checks, so an honest configuration is
  never judged outside the shapes it declares it supports). At most 2 + 2 x (primary axes) held-out cases.

For an op with a CSR input or a `bins` input (its spec's `patterns`, base/records/generators.py), every case also has
an input `pattern`: the visible checks cycle through the spec's patterns; the held-out cases through the spec's
held-out patterns (a CSR input's HELDOUT_PATTERNS: empty rows, one dense row; a `bins` input's BIN_HELDOUT_PATTERNS:
all values equal, a few bins) and then the spec's, and where the held-out shapes are fewer than those one more case
on the workload itself draws each pattern they missed -- every trial meets every held-out pattern, so a kernel tuned
to the visible layouts fails on another.

A case is a dict: workload, seed, distribution, pattern (None for an op without a patterned input), repeats, index (its
check number) and `heldout` (None, or its kind, the axes it changed and its class: what a proposer may be told, e.g.
"a held-out smaller M (rows)").
"""

from __future__ import annotations

import hashlib
from typing import Callable

from ...base.records import OpSpec, Workload

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


WIDE_TRIES = 8        # values tried per axis before it keeps the workload's value
ABOVE_SHARE = 4       # "above" draws lie in (v, v + v // ABOVE_SHARE + 1]: beyond the visible size, bounded cost


def _non_pow2(x: int, lo: int, hi: int) -> int:
    """x, moved by one to a non-power-of-two inside [lo, hi] when it is a power of two above 2."""
    if x > 2 and x & (x - 1) == 0:
        for y in (x + 1, x - 1):
            if lo <= y <= hi:
                return y
    return x


def _draw(kind: str, v: int, ax_min: int, ax_max: int | None, h: int, attempt: int) -> int | None:
    """One value for an axis: 'below' small, odd or non-power-of-two values under v (1 now and then); 'above'
    non-power-of-two values beyond v, within the axis's bounds. None when there is no room."""
    if kind == "below":
        lo, hi = max(ax_min, 1), v - 1
        if hi < lo:
            return None
        if lo == 1 and h % 5 == 0:
            return 1
        return _non_pow2(lo + h % (hi - lo + 1), lo, hi)
    lo, hi = v + 1, v + max(2, v // ABOVE_SHARE + 1)
    if ax_max is not None:
        hi = min(hi, ax_max)
    if hi < lo:
        return None
    return _non_pow2(lo + h % (hi - lo + 1), lo, hi)


def _beyond_bucket(v: int, ax_max: int | None, h: int) -> int | None:
    """A non-power-of-two value in the power-of-two bucket above v's: (b, 2b] where b = next_pow2(v), within the
    axis's maximum; None when there is no room."""
    bucket = 1 << max(0, (v - 1).bit_length())
    lo, hi = bucket + 1, 2 * bucket
    if ax_max is not None:
        hi = min(hi, ax_max)
    if hi < lo:
        return None
    return _non_pow2(lo + h % (hi - lo + 1), lo, hi)


def wide_heldout(spec: OpSpec, secret: str, workload: Workload, candidate_id: str, kind: str, axes: list[str],
                 accept: Callable[[dict[str, int]], bool], beyond: frozenset[str] = frozenset()
                 ) -> Workload | None:
    """Every axis of `axes` moved at once ('below' or 'above' the workload's value), each value drawn per
    candidate and kept only where `accept` (the op's domain, the interpreter's cost cap; for a template candidate,
    its own constraints too) holds with the others; an 'above' draw of an axis in `beyond` lies in the power-of-two
    bucket above the workload's (a kernel sized to the visible bucket is judged where it breaks), falling back to
    a value near the workload's where that does not fit; None when no axis could move."""
    current = dict(workload.axes)

    def move(ax: str, tied: str | None = None) -> bool:
        nonlocal current
        a = spec.axes[ax]
        for attempt in range(WIDE_TRIES):
            h = derive_seed(secret, "wide", kind, workload.id, candidate_id, ax, tied, attempt)
            x = None
            if kind == "above" and ax in beyond and attempt < WIDE_TRIES - 2:
                x = _beyond_bucket(workload.axes[ax], a.max, h)   # the last tries: near the visible value
            if x is None:
                x = _draw(kind, workload.axes[ax], a.min, a.max, h, attempt)
            if x is None:
                return False
            trial = {**current, ax: x, **({tied: x} if tied else {})}
            if x != workload.axes[ax] and accept(trial):
                current = trial
                return True
        return False

    stuck = [ax for ax in axes if not move(ax)]
    # axes that cannot move alone may move together at one value (attention's H and HKV of an MHA workload:
    # H % HKV == 0 holds for H = HKV = 5, never for H = 5 with HKV = 4)
    for i, ax in enumerate(stuck):
        for other in stuck[i + 1:]:
            if workload.axes[other] == workload.axes[ax] and current[other] == workload.axes[other] \
                    and current[ax] == workload.axes[ax] and move(ax, tied=other):
                break
    return None if current == workload.axes else _with(workload, current)


def heldout_workloads(spec: OpSpec, secret: str, workload: Workload, candidate_id: str,
                      fixed: tuple[str, ...] = (), accept: Callable[[dict[str, int]], bool] | None = None,
                      own_template: bool = False) -> list[tuple[str, Workload]]:
    """(kind, workload) of every held-out shape of a candidate on a workload: the primary axes at 1 and odd, then
    every free axis (not in the spec's `fixed_axes`) moved at once below the workload (the non-primary ones: small,
    odd, non-power-of-two) and above it (all of them: beyond the visible sizes)."""
    out = [("primary", w) for w in primary_heldout(spec, secret, workload, candidate_id)]
    accept = accept or (lambda axes: True)
    primary = primary_axes(spec)
    free = [a for a in spec.axes if a not in fixed]
    seen = {w.id for _, w in out} | {workload.id}
    # A candidate that is not a template's own source declares no range: what it will be sent is the op's domain,
    # so its 'above' draws leave the visible power-of-two bucket of every free axis (a kernel correct only up to the
    # visible sizes fails there). A template's own configuration is probed near the visible size, where its pruning
    # keeps the shape (its constraints are its declared range).
    beyond = frozenset() if own_template else frozenset(free)
    for kind, axes in (("below", [a for a in free if a not in primary]), ("above", free)):
        held = wide_heldout(spec, secret, workload, candidate_id, kind, axes, accept, beyond) if axes else None
        if held is not None and held.id not in seen:
            seen.add(held.id)
            out.append((kind, held))
    return out


def cases(spec: OpSpec, secret: str, checks: int, candidate_id: str, workload: Workload,
          fixed: tuple[str, ...] = (), accept: Callable[[dict[str, int]], bool] | None = None,
          own_template: bool = False) -> list[dict]:
    dists = spec.inputs_policy.distributions
    offset = derive_seed(secret, "dist", workload.id, candidate_id) % len(dists)
    out = []
    for k in range(checks):
        out.append({"workload": workload, "seed": derive_seed(secret, workload.id, candidate_id, k),
                    "distribution": dists[(offset + k) % len(dists)],
                    "repeats": DETERMINISM_RUNS if k == 0 else 1, "heldout": None})
    drawn = {c["distribution"] for c in out}
    for d in spec.inputs_policy.always:   # the statistics-aware draws: every trial, whatever the cycle reached
        if d not in drawn:
            drawn.add(d)
            out.append({"workload": workload, "seed": derive_seed(secret, workload.id, candidate_id, "always", d),
                        "distribution": d, "repeats": 1, "heldout": None})
    for j, (kind, held) in enumerate(heldout_workloads(spec, secret, workload, candidate_id, fixed, accept,
                                                       own_template)):
        out.append({"workload": held, "seed": derive_seed(secret, held.id, candidate_id, "h", j),
                    "distribution": dists[(offset + j) % len(dists)], "repeats": 1,
                    "heldout": {"kind": kind, "axes": sorted(a for a in held.axes if held.axes[a] != workload.axes[a]),
                                "class": heldout_class(spec, workload, held)}})
    _patterns(spec, secret, candidate_id, workload, out)
    for i, c in enumerate(out):
        c["index"] = i
    return out


def _patterns(spec: OpSpec, secret: str, candidate_id: str, workload: Workload, out: list[dict]) -> None:
    """Each case's input pattern, in place (None everywhere for an op without a patterned input); appends a case on
    the workload for each held-out pattern the held-out shapes missed."""
    visible = spec.patterns
    if not visible:
        for c in out:
            c["pattern"] = None
        return
    must = spec.heldout_patterns
    heldout = [*must, *(p for p in visible if p not in must)]
    k_vis = k_held = 0
    for c in out:
        if c["heldout"] is None:
            c["pattern"], k_vis = visible[k_vis % len(visible)], k_vis + 1
        else:
            c["pattern"], k_held = heldout[k_held % len(heldout)], k_held + 1
    for p in must[k_held:]:
        out.append({"workload": workload, "seed": derive_seed(secret, workload.id, candidate_id, "pattern", p),
                    "distribution": spec.inputs_policy.distributions[0], "pattern": p, "repeats": 1,
                    "heldout": {"kind": "pattern", "axes": [], "class": f"a held-out input pattern ({p})"}})


def case_label(case: dict) -> str:
    """The user-facing name of a case: shape, check number, distribution, seed, and whether it was held out."""
    w: Workload = case["workload"]
    label = f"{w.label} check {case.get('index', '?')} seed={case['seed']} distribution={case['distribution']}"
    if case.get("pattern"):
        label += f" pattern={case['pattern']}"
    held = case.get("heldout")
    return label + (f" (held-out: {held['class']})" if held else "")


def case_record(case: dict) -> dict:
    """A case as archived with a failure: everything the user needs to reproduce it."""
    w: Workload = case["workload"]
    held = case.get("heldout")
    return {"index": case.get("index"), "kind": "held-out" if held else "visible", "workload": w.label,
            "workload_id": w.id, "axes": dict(w.axes), "dtype": w.dtype.value, "distribution": case["distribution"],
            "pattern": case.get("pattern"), "seed": case["seed"], "heldout": held}


__all__ = ["DETERMINISM_RUNS", "case_label", "case_record", "cases", "derive_seed", "heldout_class",
           "heldout_workloads", "primary_axes", "primary_heldout"]

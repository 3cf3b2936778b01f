"""From a run's PASSED winners to a dispatch table whose guards are proved, not hoped.

Each workload's winner (the fastest PASSED trial) gives one measured point. Along one axis (the spec's first held-out
axis, the row or token count for most ops; `extend` may name another and widen the outer bounds) the winners of
workloads that agree on every other axis and the dtype are joined into ranges: the gaps between measured points are
split at their midpoints and neighbours with the same candidate merged. A range is kept only when the verifier
passes the candidate, at export, on the range's edges (lo, lo + 1, hi - 1, hi), on each side of its configuration's
tile boundaries (m - 1, m, m + 1 around the multiples m of its block sizes nearest each edge) and on seeded interior
points; every one of those verifications is a full battery (fresh seeded cases from several value distributions,
determinism, the verifier's held-out shapes). When one fails, the range shrinks to exact guards at its measured
points, the failure is kept in the audit, and the shapes in between run the reference. Speed is claimed only at
measured points (`ShapeClaim.kernel_us`).
"""

from __future__ import annotations

from ...base.records.device import Device

import random
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from ...base.records import Candidate, DType, OpSpec, Status, Trial, Verdict, Workload
from .guards import AxisRange, Guard
from .table import DispatchEntry, DispatchTable, ShapeClaim

BLOCK_PARAM = re.compile(r"BLOCK|ROWS|CHUNK")   # configuration parameters that tile an axis
MAX_EDGE_POINTS = 16                             # per range, before the seeded interior points


class ExportError(ValueError):
    """The run cannot be packaged (no PASSED trial, the op folder changed, a bad --extend, ...)."""


@dataclass(frozen=True)
class Winner:
    """A workload's fastest PASSED trial with what it measured (the confirmation's numbers when there was one)."""

    workload: Workload
    candidate: Candidate
    trial: Trial
    kernel_us: float
    ci_us: tuple[float, float]
    versus: tuple[tuple[str, str], ...] = ()   # the measurement's verdicts: (baseline, FASTER/SAME/SLOWER)

    def verdict(self, baseline: str) -> str | None:
        return dict(self.versus).get(baseline)


@dataclass
class VerificationNote:
    """One export-time verification: a shape, its verdict, and the range it was checking."""

    entry_range: str
    axes: dict[str, int]
    status: str
    message: str = ""
    case: str = ""


@dataclass
class TableBuild:
    table: DispatchTable
    notes: list[VerificationNote] = field(default_factory=list)
    winners: list[Winner] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)   # winners not packaged, and why


def arch_of(environment: dict) -> str:
    """The guard's architecture for a run's environment: 'interpret' or 'sm_XY'."""
    if not Device.of_environment(environment).is_cuda:
        return "interpret"
    major, minor = (environment.get("properties") or {}).get("capability", [0, 0])
    return f"sm_{major}{minor}"


def range_axis(spec: OpSpec) -> str:
    """The axis ranges extend along by default: the verifier's first held-out axis."""
    return (spec.heldout_axes or [spec.inputs[0].shape[0]])[0]


EXTEND = re.compile(r"\s*(?:(\w+)\.)?(\w+)\s*=\s*(\d+)\s*:\s*(\d+)\s*")


def parse_extend(texts: list[str] | str | None, spec: OpSpec) -> tuple[str, int, int] | None:
    """The one `--extend` that applies to `spec`'s op: 'OP.AXIS=LO:HI' naming it, or 'AXIS=LO:HI' where the op has
    that axis; ('M', 1, 4096), checked against the axis's bounds. None when none applies."""
    found = []
    for text in [texts] if isinstance(texts, str) else (texts or []):
        m = EXTEND.fullmatch(text)
        if not m:
            raise ExportError(f"--extend {text!r}: use AXIS=LO:HI or OP.AXIS=LO:HI, e.g. M=1:4096")
        op, axis, lo, hi = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        if op is not None and op != spec.name:
            continue
        if axis not in spec.axes:
            if op is None:
                continue
            raise ExportError(f"--extend {text!r}: {spec.name} has no axis {axis!r} (axes: {', '.join(spec.axes)})")
        ax = spec.axes[axis]
        if lo > hi or lo < ax.min or (ax.max is not None and hi > ax.max):
            bound = f"[{ax.min}, {ax.max}]" if ax.max is not None else f">= {ax.min}"
            raise ExportError(f"--extend {text!r}: the range must be non-empty and inside {spec.name}'s {axis} "
                              f"domain {bound}")
        found.append((axis, lo, hi))
    if len(found) > 1:
        raise ExportError(f"several --extend apply to {spec.name}: give one (OP.AXIS=LO:HI picks an op)")
    return found[0] if found else None


def unused_extends(texts: list[str], specs: list[OpSpec]) -> list[str]:
    """The --extend values that apply to none of the ops."""
    return [t for t in texts if not any(parse_extend([t], s) for s in specs)]


def block_sizes(config: dict) -> list[int]:
    """The configuration's tile sizes: integer parameters named BLOCK_*, ROWS or CHUNK, at least 2."""
    return sorted({int(v) for k, v in config.items()
                   if BLOCK_PARAM.search(k) and isinstance(v, int) and not isinstance(v, bool) and v >= 2})


def edge_points(lo: int, hi: int, config: dict) -> list[int]:
    """The range's edges and each side of its tile boundaries nearest each edge (bounded)."""
    pts = {lo, min(lo + 1, hi), max(hi - 1, lo), hi}
    for b in block_sizes(config):
        first = -(-lo // b) * b
        mults = [m for m in (first, first + b) if m <= hi] + [m for m in ((hi // b) * b, (hi // b - 1) * b) if m >= lo]
        for m in mults:
            pts.update(p for p in (m - 1, m, m + 1) if lo <= p <= hi)
    pts = sorted(pts)
    if len(pts) > MAX_EDGE_POINTS:   # keep the four edges, then the points nearest them
        edges = {lo, min(lo + 1, hi), max(hi - 1, lo), hi}
        rest = sorted((p for p in pts if p not in edges), key=lambda p: min(p - lo, hi - p))
        pts = sorted(edges | set(rest[:MAX_EDGE_POINTS - len(edges)]))
    return pts


def interior_points(lo: int, hi: int, count: int, rng: random.Random, skip: set[int]) -> list[int]:
    """Seeded points strictly inside the range, not already among `skip`."""
    pool = hi - lo - 1
    if pool <= 0 or count <= 0:
        return []
    out: set[int] = set()
    for _ in range(count * 8):
        if len(out) >= min(count, pool):
            break
        p = rng.randint(lo + 1, hi - 1)
        if p not in skip:
            out.add(p)
    return sorted(out)


class ShapeVerifier:
    """Runs the verifier's battery for one candidate on one shape, in an isolated worker (see execute/)."""

    def __init__(self, bundle, device: str, work_dir: Path, checks: int = 2):
        from ...core.bench.policy import policies_for
        from ...core.execute.evaluate import Evaluator
        from ...core.execute.pool import Worker, job_root
        self.secret = secrets.token_hex(16)   # fresh held-out draws, never those the run's proposers faced
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.worker = Worker(device, job_root(self.work_dir), log_path=self.work_dir / "export-worker.log",
                             remove_work_dir=True)
        policy, _ = policies_for(device)
        self.evaluator = Evaluator(bundle, device, self.worker, policy, self.secret, checks)
        self.loaded: set[str] = set()

    def verify(self, candidate: Candidate, workload: Workload) -> Verdict:
        if candidate.id not in self.loaded:
            bad = self.evaluator.screen(candidate)
            if bad is not None:
                return bad
            loaded = self.evaluator.load(candidate)
            if loaded is not None:
                return loaded if isinstance(loaded, Verdict) else Verdict(
                    status=Status.COMPILE_ERROR, message="candidate failed to import", log=loaded.log)
            self.loaded.add(candidate.id)
        job = self.worker.work_dir / f"export-{candidate.id}-{workload.id}"
        job.mkdir(parents=True, exist_ok=True)
        verdict = self.evaluator.verify(candidate, workload, job)[1]   # (build, verdict, seconds, ...)
        if verdict.status is not Status.PASSED:
            self.loaded.discard(candidate.id)   # a crash replaced the worker: load again before the next shape
        return verdict

    def close(self) -> None:
        self.worker.close()


def _guard(spec: OpSpec, dtype: DType, arch: str, axes: dict[str, int], axis: str, lo: int, hi: int) -> Guard:
    ranges = {a: AxisRange(lo=v, hi=v) for a, v in axes.items()}
    ranges[axis] = AxisRange(lo=lo, hi=hi)
    return Guard(dtype=dtype, arch=arch, axes=ranges, scalars=dict(spec.scalars))


def build_table(spec: OpSpec, winners: list[Winner], arch: str, kernel_path, verifier: ShapeVerifier | None, *,
                extend: tuple[str, int, int] | None = None, ranges: bool = True, interior: int = 3,
                seed: int = 0, keep_slower: bool = False, against: tuple[str, ...] = (),
                screen=None) -> TableBuild:
    """The op's table from its winners. `kernel_path(candidate)` names the source inside the package; `verifier`
    may be None only when `ranges` is False (exact guards need no verification beyond the run's). On a GPU
    (`arch` not 'interpret') a winner measured SLOWER than eager PyTorch, or than a baseline named in `against`
    (e.g. the library call the model would otherwise make: sdpa-cudnn, cublas), is left out -- the reference serves
    its shape -- and so is one never compared with a baseline in `against`; `keep_slower` keeps them all.
    Interpreter timings decide nothing. `screen(winner)`, for the winners kept so far, returns why to leave one out
    ("" keeps it): compute-sanitizer's findings at export (deliver/package/export.py)."""
    if not winners:
        raise ExportError(f"{spec.name}: the run has no PASSED, measured trial to package")
    winners, left_out = _kept_winners(winners, arch, keep_slower, against, screen)
    axis = extend[0] if extend else range_axis(spec)
    rng = random.Random(seed)
    groups: dict[tuple, list[Winner]] = {}
    for w in winners:
        rest = tuple((a, v) for a, v in w.workload.axes.items() if a != axis)
        groups.setdefault((w.workload.dtype, rest), []).append(w)
    entries: list[DispatchEntry] = []
    notes: list[VerificationNote] = []

    def claim(w: Winner) -> ShapeClaim:
        return ShapeClaim(axes=dict(w.workload.axes), kernel_us=w.kernel_us, kernel_ci_us=w.ci_us, source="run")

    def add(w: Winner, lo: int, hi: int, shapes: list[ShapeClaim]) -> None:
        entries.append(DispatchEntry(
            id=f"e{len(entries)}", guard=_guard(spec, w.workload.dtype, arch, w.workload.axes, axis, lo, hi),
            template=w.candidate.template, kernel=kernel_path(w.candidate), config=dict(w.candidate.config),
            candidate_id=w.candidate.id, shapes=shapes))

    def add_exact(ws: list[Winner]) -> None:
        for w in ws:
            v = w.workload.axes[axis]
            add(w, v, v, [claim(w)])

    for (dtype, _), members in sorted(groups.items(), key=lambda kv: (kv[0][0].value, kv[0][1])):
        members.sort(key=lambda w: w.workload.axes[axis])
        if not ranges:
            add_exact(members)
            continue
        for lo, hi, ws in _segments(members, axis, extend):
            if lo == hi:
                add(ws[0], lo, hi, [claim(ws[0])])
                continue
            if verifier is None:
                raise ExportError("ranges need a verifier (or pass ranges=False for exact guards)")
            label = f"{dtype.value} {axis}=[{lo},{hi}] {ws[0].candidate.label}"
            verified = _verify_range(verifier, ws, axis, lo, hi, interior, rng, label, notes)
            if verified is None:   # shrink to what the run verified: exact guards at the measured points
                add_exact(ws)
            else:
                add(ws[0], lo, hi, sorted([claim(w) for w in ws] + verified, key=lambda s: s.axes[axis]))
    return TableBuild(table=DispatchTable(op=spec.name, axes=list(spec.axes), entries=entries), notes=notes,
                      winners=winners, left_out=left_out)


def _kept_winners(winners: list[Winner], arch: str, keep_slower: bool, against: tuple[str, ...],
                  screen) -> tuple[list[Winner], list[str]]:
    """The winners `build_table` packages (see there) and why each other one is left out."""
    left_out = []
    if arch != "interpret" and not keep_slower:
        kept = []
        for w in winners:
            why = next((f"measured SLOWER than {b}" for b in ("eager", *against) if w.verdict(b) == "SLOWER"), "")
            why = why or next((f"never compared with {b} (run with confirmation)" for b in against
                               if w.verdict(b) is None), "")
            if why:
                left_out.append(f"{w.workload.label}: {w.candidate.label} {why}; the reference serves it")
            else:
                kept.append(w)
        winners = kept
    if screen is not None:
        kept = []
        for w in winners:
            why = screen(w)
            if why:
                left_out.append(f"{w.workload.label}: {w.candidate.label} {why}; the reference serves it")
            else:
                kept.append(w)
        winners = kept
    return winners, left_out


def _segments(members: list[Winner], axis: str, extend: tuple[str, int, int] | None
              ) -> list[tuple[int, int, list[Winner]]]:
    """The range axis cut between neighbouring measured points (at their midpoints; the ends at the extremes or
    `extend`'s), neighbours with the same candidate joined: (low, high, winners measured inside)."""
    pts = [w.workload.axes[axis] for w in members]
    lo0 = min(extend[1], pts[0]) if extend else pts[0]
    hi0 = max(extend[2], pts[-1]) if extend else pts[-1]
    segs: list[tuple[int, int, list[Winner]]] = []
    for i, w in enumerate(members):
        lo = lo0 if i == 0 else segs[-1][1] + 1
        hi = hi0 if i == len(members) - 1 else (pts[i] + pts[i + 1]) // 2
        if segs and segs[-1][2][0].candidate.id == w.candidate.id:
            segs[-1] = (segs[-1][0], hi, segs[-1][2] + [w])
        else:
            segs.append((lo, hi, [w]))
    return segs


def _verify_range(verifier: ShapeVerifier, ws: list[Winner], axis: str, lo: int, hi: int, interior: int,
                  rng: random.Random, label: str, notes: list[VerificationNote]) -> list[ShapeClaim] | None:
    """Verify the segment's candidate at the range's edge points and `interior` random inner points (none of them
    measured); the verified shapes, or None at the first failure. Every verification goes to `notes`."""
    measured = {w.workload.axes[axis] for w in ws}
    edges = [p for p in edge_points(lo, hi, ws[0].candidate.config) if p not in measured]
    inner = interior_points(lo, hi, interior, rng, set(edges) | measured)
    shapes = []
    for source, points in (("edge", edges), ("interior", inner)):
        for p in points:
            wl = ws[0].workload.model_copy(update={"axes": {**ws[0].workload.axes, axis: p}})
            v = verifier.verify(ws[0].candidate, wl)
            notes.append(VerificationNote(entry_range=label, axes=dict(wl.axes), status=v.status.value,
                                          message=v.message[:500], case=v.case or ""))
            if v.status is not Status.PASSED:
                return None
            shapes.append(ShapeClaim(axes=dict(wl.axes), source=source))
    return shapes

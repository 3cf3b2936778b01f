"""From a run's PASSED winners to a dispatch table whose guards are proved, not hoped.

Each workload's winner (the fastest PASSED trial) gives one measured point. Guards widen along the axes `extend`
names (one range per axis, as many axes as given; without it, along the spec's first held-out axis -- the row or
token count for most ops -- between the measured points only). Along the first of them the winners of workloads that
agree on every other axis and the dtype are joined into ranges: the gaps between measured points are split at their
midpoints and neighbours with the same candidate merged. Along every further widened axis a winner's guard takes the
cell of its measured value among the values measured at the same non-widened axes (gaps split at midpoints, the outer
cells out to the extension), so the boxes still partition the domain. A box is kept only when the verifier passes
the candidate, at export, along each widened axis on its edges (lo, lo + 1, hi - 1, hi) and on each side of its
configuration's tile boundaries (m - 1, m, m + 1 around the multiples m of its block sizes nearest each edge), the
other axes at the measured shape; on every corner of the box; and on seeded interior points drawn over every widened
axis (`box_points`). Every one of those verifications is a full battery (fresh seeded cases from several value
distributions, determinism, the verifier's held-out shapes). When one fails, the box shrinks to exact guards at its
measured points, the failure is kept in the audit, and the shapes in between run the reference. Speed is claimed
only at measured points (`ShapeClaim.kernel_us`).
"""

from __future__ import annotations

from ...base.records.device import Device

import itertools
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


def parse_extend(texts: list[str] | str | None, spec: OpSpec) -> list[tuple[str, int, int]]:
    """The `--extend` values that apply to `spec`'s op, one per axis: 'OP.AXIS=LO:HI' naming it, or 'AXIS=LO:HI'
    where the op has that axis; [('M', 1, 4096), ('N', 64, 128)], each checked against the axis's bounds, in the
    order given. Empty when none applies; two for the same axis of one op are refused."""
    found: dict[str, tuple[str, int, int]] = {}
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
        if axis in found:
            raise ExportError(f"several --extend give {spec.name}'s axis {axis}: give one per axis "
                              f"(OP.AXIS=LO:HI picks an op)")
        found[axis] = (axis, lo, hi)
    return list(found.values())


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


def _guard(spec: OpSpec, dtype: DType, arch: str, axes: dict[str, int], box: dict[str, tuple[int, int]]) -> Guard:
    ranges = {a: AxisRange(lo=v, hi=v) for a, v in axes.items()}
    ranges.update({a: AxisRange(lo=lo, hi=hi) for a, (lo, hi) in box.items()})
    return Guard(dtype=dtype, arch=arch, axes=ranges, scalars=dict(spec.scalars))


def _cells(values: list[int], lo: int, hi: int) -> dict[int, tuple[int, int]]:
    """Each measured value's cell of [min(lo, first), max(hi, last)]: the gaps between values split at midpoints."""
    vs = sorted(set(values))
    lo, hi = min(lo, vs[0]), max(hi, vs[-1])
    return {v: (lo if i == 0 else (vs[i - 1] + v) // 2 + 1, hi if i == len(vs) - 1 else (v + vs[i + 1]) // 2)
            for i, v in enumerate(vs)}


def box_points(box: dict[str, tuple[int, int]], at: dict[str, int], config: dict, interior: int,
               rng: random.Random) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """(edge points, seeded interior points) that verify a guard's box before it is kept: along each widened axis its
    edges and tile boundaries (`edge_points`) with the other axes at the measured shape `at`, and every corner of the
    box; inside, `interior` points drawn over every widened axis at once. The measured shape itself is left out."""
    seen = {tuple(sorted(at.items()))}
    edges: list[dict[str, int]] = []

    def keep(point: dict[str, int], into: list) -> None:
        key = tuple(sorted(point.items()))
        if key not in seen:
            seen.add(key)
            into.append(point)
    for axis, (lo, hi) in box.items():
        for p in edge_points(lo, hi, config):
            keep({**at, axis: p}, edges)
    for corner in itertools.product(*(sorted({lo, hi}) for lo, hi in box.values())):
        keep({**at, **dict(zip(box, corner))}, edges)
    inner: list[dict[str, int]] = []
    wide = {a: r for a, r in box.items() if r[1] - r[0] > 1}
    for _ in range(interior * 8 if wide else 0):
        if len(inner) >= interior:
            break
        keep({**at, **{a: rng.randint(lo + 1, hi - 1) for a, (lo, hi) in wide.items()}}, inner)
    return edges, inner


def build_table(spec: OpSpec, winners: list[Winner], arch: str, kernel_path, verifier: ShapeVerifier | None, *,
                extend: tuple[str, int, int] | list[tuple[str, int, int]] | None = None, ranges: bool = True,
                interior: int = 3, seed: int = 0, keep_slower: bool = False, against: tuple[str, ...] = (),
                screen=None) -> TableBuild:
    """The op's table from its winners. `kernel_path(candidate)` names the source inside the package; `verifier`
    may be None only when `ranges` is False (exact guards need no verification beyond the run's). `extend`: one
    (axis, lo, hi) or a list, one per axis; the ranges widen along each of those axes (default: the spec's first
    held-out axis, between the measured points only). On a GPU
    (`arch` not 'interpret') a winner measured SLOWER than eager PyTorch, or than a baseline named in `against`
    (e.g. the library call the model would otherwise make: sdpa-cudnn, cublas), is left out -- the reference serves
    its shape -- and so is one never compared with a baseline in `against`; `keep_slower` keeps them all.
    Interpreter timings decide nothing. `screen(winner)`, for the winners kept so far, returns why to leave one out
    ("" keeps it): compute-sanitizer's findings at export (deliver/package/export.py)."""
    if not winners:
        raise ExportError(f"{spec.name}: the run has no PASSED, measured trial to package")
    winners, left_out = _kept_winners(winners, arch, keep_slower, against, screen)
    extends = [extend] if isinstance(extend, tuple) else list(extend or [])
    widened = {a: (lo, hi) for a, lo, hi in extends} or {range_axis(spec): (None, None)}
    axis = next(iter(widened))
    build = TableBuild(table=DispatchTable(op=spec.name, axes=list(spec.axes), entries=[]), winners=winners,
                       left_out=left_out)
    entries: list[DispatchEntry] = []

    def add(w: Winner, box: dict[str, tuple[int, int]], shapes: list[ShapeClaim]) -> None:
        entries.append(DispatchEntry(
            id=f"e{len(entries)}", guard=_guard(spec, w.workload.dtype, arch, w.workload.axes, box),
            template=w.candidate.template, kernel=kernel_path(w.candidate), config=dict(w.candidate.config),
            candidate_id=w.candidate.id, shapes=shapes))

    if not ranges:
        for w in winners:
            add(w, {}, [_claim(w)])
    else:
        for w0, box, ws, shapes in _boxes(winners, widened, axis, verifier, interior, random.Random(seed),
                                          build.notes):
            if box is None:   # shrunk to what the run verified: exact guards at the measured points
                for w in ws:
                    add(w, {}, [_claim(w)])
            else:
                add(w0, box, shapes)
    build.table = DispatchTable(op=spec.name, axes=list(spec.axes), entries=entries)
    return build


def _claim(w: Winner) -> ShapeClaim:
    return ShapeClaim(axes=dict(w.workload.axes), kernel_us=w.kernel_us, kernel_ci_us=w.ci_us, source="run")


def _kept_winners(winners: list[Winner], arch: str, keep_slower: bool, against: tuple[str, ...],
                  screen) -> tuple[list[Winner], list[str]]:
    """The winners a table may take (see build_table) and why each other one was left out."""
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


def _boxes(winners: list[Winner], widened: dict[str, tuple], axis: str, verifier, interior: int,
           rng: random.Random, notes: list[VerificationNote]):
    """(first winner, box or None when a verification failed, its winners, shape claims) per range: along `axis`
    the winners of workloads that agree on every other axis and the dtype, gaps split at midpoints and neighbours
    with the same candidate merged; along every other widened axis the cell of the measured value among the values
    of workloads that agree on the axes not widened (gaps split at midpoints, the outer cells out to the extension)."""
    others = [a for a in widened if a != axis]
    cells: dict[tuple, dict[str, dict[int, tuple[int, int]]]] = {}
    for w in winners:
        key = (w.workload.dtype, tuple((a, v) for a, v in w.workload.axes.items() if a not in widened))
        cells.setdefault(key, {a: [] for a in others})
        for a in others:
            cells[key][a].append(w.workload.axes[a])
    for key, per_axis in cells.items():
        cells[key] = {a: _cells(vs, *widened[a]) for a, vs in per_axis.items()}
    groups: dict[tuple, list[Winner]] = {}
    for w in winners:
        rest = tuple((a, v) for a, v in w.workload.axes.items() if a != axis)
        groups.setdefault((w.workload.dtype, rest), []).append(w)
    for (dtype, _), members in sorted(groups.items(), key=lambda kv: (kv[0][0].value, kv[0][1])):
        members.sort(key=lambda w: w.workload.axes[axis])
        w0 = members[0].workload
        key = (dtype, tuple((a, v) for a, v in w0.axes.items() if a not in widened))
        side = {a: cells[key][a][w0.axes[a]] for a in others}
        pts = [w.workload.axes[axis] for w in members]
        lo_ext, hi_ext = widened[axis]
        lo0 = pts[0] if lo_ext is None else min(lo_ext, pts[0])
        hi0 = pts[-1] if hi_ext is None else max(hi_ext, pts[-1])
        segs: list[tuple[int, int, list[Winner]]] = []
        for i, w in enumerate(members):
            lo = lo0 if i == 0 else segs[-1][1] + 1
            hi = hi0 if i == len(members) - 1 else (pts[i] + pts[i + 1]) // 2
            if segs and segs[-1][2][0].candidate.id == w.candidate.id:
                segs[-1] = (segs[-1][0], hi, segs[-1][2] + [w])
            else:
                segs.append((lo, hi, [w]))
        for lo, hi, ws in segs:
            box = {axis: (lo, hi), **side}
            yield ws[0], *_verified(ws, box, verifier, interior, rng, notes)


def _verified(ws: list[Winner], box: dict[str, tuple[int, int]], verifier, interior: int, rng: random.Random,
              notes: list[VerificationNote]) -> tuple[dict | None, list[Winner], list[ShapeClaim]]:
    """(the box, or None when a verification on it failed; its winners; shape claims: the measured shapes, then the
    verified points). A box that is one point needs no verification."""
    shapes = [_claim(w) for w in ws]
    if all(lo == hi for lo, hi in box.values()):
        return box, ws, shapes[:1]
    if verifier is None:
        raise ExportError("ranges need a verifier (or pass ranges=False for exact guards)")
    measured = {tuple(sorted(w.workload.axes.items())) for w in ws}
    w0 = ws[0]
    edges, inner = box_points(box, dict(w0.workload.axes), w0.candidate.config, interior, rng)
    label = f"{w0.workload.dtype.value} " + " ".join(f"{a}=[{lo},{hi}]" for a, (lo, hi) in box.items()) + \
        f" {w0.candidate.label}"
    for source, points in (("edge", edges), ("interior", inner)):
        for axes in points:
            if tuple(sorted(axes.items())) in measured:
                continue
            wl = w0.workload.model_copy(update={"axes": axes})
            v = verifier.verify(w0.candidate, wl)
            notes.append(VerificationNote(entry_range=label, axes=dict(wl.axes), status=v.status.value,
                                          message=v.message[:500], case=v.case or ""))
            if v.status is not Status.PASSED:
                return None, ws, shapes
            shapes.append(ShapeClaim(axes=dict(wl.axes), source=source))
    first = next(iter(box))
    return box, ws, sorted(shapes, key=lambda s: tuple(s.axes[a] for a in (first, *box)))

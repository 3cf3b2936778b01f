"""Dispatch guards: partition checks against brute force, the precomputed lookup against a linear scan, and tables
built from winners partitioning their domain with each measured shape landing on its own winner."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.package.build import Winner, build_table, edge_points
from kernelloop.deliver.package.guards import AxisRange, Guard, PartitionError, check_partition, overlap, pairwise_disjoint
from kernelloop.deliver.package.table import DispatchEntry, DispatchTable, Dispatcher, ShapeClaim
from kernelloop.base.records import Candidate, DType, Status, Trial, Verdict, Workload
from kernelloop.core.spec import load_op

AXES = ["M", "N"]
dtypes = st.sampled_from([DType.fp16, DType.bf16])


@st.composite
def boxes(draw):
    out = {}
    for a in AXES:
        lo = draw(st.integers(1, 40))
        out[a] = AxisRange(lo=lo, hi=lo + draw(st.integers(0, 12)))
    return Guard(dtype=draw(dtypes), arch=draw(st.sampled_from(["sm_90", "interpret"])), axes=out)


@settings(max_examples=300, deadline=None)
@given(st.lists(boxes(), max_size=8))
def test_check_partition_agrees_with_brute_force(guards):
    try:
        check_partition(guards, AXES)
        raised = False
    except PartitionError:
        raised = True
    assert raised == (not pairwise_disjoint(guards))


def _entry(i, g):
    return DispatchEntry(id=f"e{i}", guard=g, template="t", kernel="kernels/t.py", config={"X": i}, candidate_id=f"c{i}",
                         shapes=[ShapeClaim(axes={a: r.lo for a, r in g.axes.items()}, kernel_us=1.0, source="run")])


@settings(max_examples=200, deadline=None)
@given(st.lists(boxes(), max_size=8), st.lists(st.tuples(dtypes, st.integers(0, 60), st.integers(0, 60)),
                                                 min_size=1, max_size=30))
def test_lookup_matches_a_linear_scan_and_every_input_hits_at_most_one_entry(guards, points):
    kept = []
    for g in guards:   # a disjoint subset
        if all(not overlap(g, k) for k in kept):
            kept.append(g)
    table = DispatchTable(op="x", axes=AXES, entries=[_entry(i, g) for i, g in enumerate(kept)])
    d = Dispatcher(table)
    for dtype, m, n in points:
        for arch in ("sm_90", "interpret"):
            hits = [i for i, g in enumerate(kept) if g.accepts(dtype, arch, {"M": m, "N": n})]
            assert len(hits) <= 1
            assert d.select(dtype, arch, (m, n)) == (hits[0] if hits else -1)
            assert d.select(dtype, arch, (m, n)) == (hits[0] if hits else -1)   # memoised: same answer


def test_overlapping_table_is_refused_when_built_and_when_loaded():
    g1 = Guard(dtype=DType.fp16, arch="sm_90", axes={"M": AxisRange(lo=1, hi=10), "N": AxisRange(lo=64, hi=64)})
    g2 = Guard(dtype=DType.fp16, arch="sm_90", axes={"M": AxisRange(lo=10, hi=20), "N": AxisRange(lo=64, hi=64)})
    with pytest.raises(ValueError, match="overlap"):
        DispatchTable(op="x", axes=AXES, entries=[_entry(0, g1), _entry(1, g2)])
    ok = DispatchTable(op="x", axes=AXES, entries=[_entry(0, g1)]).model_dump_json()
    bad = ok.replace('"entries":[', '"entries":[' + _entry(1, g2).model_dump_json() + ",")
    with pytest.raises(ValueError, match="overlap"):
        DispatchTable.model_validate_json(bad)
    with pytest.raises(ValueError):
        AxisRange(lo=5, hi=4)


def test_edge_points_cover_edges_and_both_sides_of_tile_boundaries():
    pts = edge_points(1, 300, {"BLOCK_M": 64, "num_warps": 4, "PREFETCH": 1})
    for p in (1, 2, 299, 300, 63, 64, 65, 127, 128, 129, 255, 256, 257):
        assert p in pts, p
    assert all(1 <= p <= 300 for p in pts)
    assert edge_points(7, 7, {"BLOCK_M": 4}) == [7]


class FakeVerifier:
    """Stands in for the isolated verifier in the table-building logic tests: fails the listed shapes."""

    def __init__(self, fail=()):
        self.fail, self.seen = set(fail), []

    def verify(self, candidate, workload):
        self.seen.append((workload.dtype, workload.axes["N"], workload.axes["M"]))
        if workload.axes["M"] in self.fail:
            return Verdict(status=Status.RUNTIME_ERROR, message="stand-in failure", case=workload.label)
        return Verdict(status=Status.PASSED)


SPEC = load_op(ops_dir() / "rmsnorm").spec


def _winner(m, n, dtype, cfg):
    w = Workload(op="rmsnorm", axes={"M": m, "N": n}, dtype=dtype)
    c = Candidate(op="rmsnorm", template="kernel", source="def launch(): pass\n", config=cfg, proposer="test")
    t = Trial(run_id="r", index=0, candidate_id=c.id, workload_id=w.id, manifest_hash="m",
              verdict=Verdict(status=Status.PASSED), started=0, finished=0)
    return Winner(workload=w, candidate=c, trial=t, kernel_us=float(m), ci_us=(m * 0.9, m * 1.1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 200), st.sampled_from([256, 512]), dtypes, st.integers(0, 2)),
                min_size=1, max_size=10, unique_by=lambda t: (t[0], t[1], t[2])),
       st.booleans(), st.integers(0, 3))
def test_built_tables_partition_and_measured_shapes_hit_their_own_winner(specs, extend, fail_every):
    winners = [_winner(m, n, d, {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4 * (k + 1)}) for m, n, d, k in specs]
    fv = FakeVerifier(fail=set(range(3, 400, 7)) if fail_every else ())
    b = build_table(SPEC, winners, "interpret", lambda c: "kernels/k.py", fv,
                    extend=("M", 1, 250) if extend else None, seed=1)
    check_partition([e.guard for e in b.table.entries], b.table.axes)
    d = Dispatcher(b.table)
    for w in winners:
        idx = d.select(w.workload.dtype, "interpret", (w.workload.axes["M"], w.workload.axes["N"]))
        assert idx >= 0 and b.table.entries[idx].candidate_id == w.candidate.id
    # a range is kept only if every point verified on it passed; its shapes list what was verified
    for e in b.table.entries:
        r = e.guard.axes["M"]
        if not r.exact:
            assert not any(r.lo <= m <= r.hi for d, n, m in fv.seen
                           if m in fv.fail and d == e.guard.dtype and n == e.guard.axes["N"].lo)
            assert {r.lo, r.hi} <= {s.axes["M"] for s in e.shapes}
            assert all(s.kernel_us is None or s.source == "run" for s in e.shapes)


def test_a_failed_edge_shrinks_the_range_to_exact_guards():
    cfg = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4}
    winners = [_winner(8, 256, DType.fp16, cfg), _winner(40, 256, DType.fp16, cfg)]
    ok = build_table(SPEC, winners, "interpret", lambda c: "k.py", FakeVerifier(), seed=0)
    assert [(e.guard.axes["M"].lo, e.guard.axes["M"].hi) for e in ok.table.entries] == [(8, 40)]
    bad = build_table(SPEC, winners, "interpret", lambda c: "k.py", FakeVerifier(fail={39}), seed=0)
    assert [(e.guard.axes["M"].lo, e.guard.axes["M"].hi) for e in bad.table.entries] == [(8, 8), (40, 40)]
    assert any(n.status == "RUNTIME_ERROR" and n.axes["M"] == 39 for n in bad.notes)


def test_distinct_winners_split_the_gap_at_the_midpoint():
    a = _winner(8, 256, DType.fp16, {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4})
    b = _winner(40, 256, DType.fp16, {"BLOCK_N": 256, "ROWS": 1, "num_warps": 8})
    t = build_table(SPEC, [a, b], "interpret", lambda c: "k.py", FakeVerifier(), seed=0).table
    assert [(e.guard.axes["M"].lo, e.guard.axes["M"].hi) for e in t.entries] == [(8, 24), (25, 40)]
    assert random.Random(0)   # the interior draws are seeded: same table twice
    assert build_table(SPEC, [a, b], "interpret", lambda c: "k.py", FakeVerifier(), seed=0).table == t


def test_on_a_gpu_winners_slower_than_eager_are_left_to_the_reference():
    cfg = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4}
    fast, slow = _winner(8, 256, DType.fp16, cfg), _winner(40, 512, DType.fp16, cfg)
    fast = Winner(**{**fast.__dict__, "versus": (("eager", "FASTER"), ("liger", "SAME"))})
    slow = Winner(**{**slow.__dict__, "versus": (("eager", "SLOWER"),)})
    gpu = build_table(SPEC, [fast, slow], "sm_90", lambda c: "k.py", FakeVerifier(), ranges=False)
    assert [e.guard.axes["N"].lo for e in gpu.table.entries] == [256] and "SLOWER" in gpu.left_out[0]
    kept = build_table(SPEC, [fast, slow], "sm_90", lambda c: "k.py", FakeVerifier(), ranges=False, keep_slower=True)
    assert len(kept.table.entries) == 2
    strict = build_table(SPEC, [fast, slow], "sm_90", lambda c: "k.py", FakeVerifier(), ranges=False,
                         against=("liger",))
    assert len(strict.table.entries) == 1 and "SLOWER than eager" in strict.left_out[0]
    unproved = build_table(SPEC, [fast], "sm_90", lambda c: "k.py", FakeVerifier(), ranges=False, against=("cudnn",))
    assert not unproved.table.entries and "never compared with cudnn" in unproved.left_out[0]
    interp = build_table(SPEC, [fast, slow], "interpret", lambda c: "k.py", FakeVerifier(), ranges=False)
    assert len(interp.table.entries) == 2 and not interp.left_out   # interpreter timings decide nothing


def test_a_shape_claim_names_its_interval_as_show_does_and_old_tables_load():
    new = ShapeClaim(axes={"N": 256}, kernel_us=2.0, kernel_ci_us=(1.9, 2.1), source="run")
    assert new.model_dump(mode="json")["kernel_ci_us"] == [1.9, 2.1] and "ci_us" not in new.model_dump()
    old = ShapeClaim.model_validate_json('{"axes": {"N": 256}, "kernel_us": 2.0, "ci_us": [1.9, 2.1], "source": "run"}')
    assert old == new


class BoxVerifier:
    """A stand-in verifier that fails every shape `bad(M, N)` says is bad and records what it was asked."""

    def __init__(self, bad=lambda m, n: False):
        self.bad, self.seen = bad, []

    def verify(self, candidate, workload):
        m, n = workload.axes["M"], workload.axes["N"]
        self.seen.append((workload.dtype, m, n))
        if self.bad(m, n):
            return Verdict(status=Status.RUNTIME_ERROR, message="stand-in failure", case=workload.label)
        return Verdict(status=Status.PASSED)


def test_guards_widen_along_every_extended_axis_and_are_verified_at_their_edges():
    cfg = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4}
    a = _winner(8, 256, DType.fp16, cfg)
    b = _winner(40, 512, DType.fp16, {**cfg, "num_warps": 8})
    fv = BoxVerifier()
    t = build_table(SPEC, [a, b], "interpret", lambda c: "k.py", fv, extend=[("M", 1, 64), ("N", 128, 1024)],
                    seed=0, interior=2).table
    boxes = [{k: (r.lo, r.hi) for k, r in e.guard.axes.items()} for e in t.entries]
    assert boxes == [{"M": (1, 64), "N": (128, 384)}, {"M": (1, 64), "N": (385, 1024)}]
    check_partition([e.guard for e in t.entries], t.axes)
    seen = {(m, n) for _, m, n in fv.seen}
    for box, (m0, n0) in zip(boxes, [(8, 256), (40, 512)]):
        (mlo, mhi), (nlo, nhi) = box["M"], box["N"]
        assert {(mlo, nlo), (mlo, nhi), (mhi, nlo), (mhi, nhi)} <= seen                      # every corner
        assert {(mlo, n0), (mlo + 1, n0), (mhi - 1, n0), (mhi, n0)} <= seen                   # M's edges
        assert {(m0, nlo), (m0, nlo + 1), (m0, nhi - 1), (m0, nhi)} <= seen                   # N's edges
    assert {(8, 255), (8, 256), (8, 257)} - {(8, 256)} <= seen                              # N's tile boundary
    d = Dispatcher(t)
    assert d.select(DType.fp16, "interpret", (64, 128)) == 0 and d.select(DType.fp16, "interpret", (1, 1024)) == 1
    assert d.select(DType.fp16, "interpret", (65, 128)) == -1 and d.select(DType.fp16, "interpret", (1, 127)) == -1


def test_a_failed_edge_on_a_second_axis_shrinks_that_box():
    cfg = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4}
    a, b = _winner(8, 256, DType.fp16, cfg), _winner(8, 512, DType.fp16, {**cfg, "num_warps": 8})
    fv = BoxVerifier(bad=lambda m, n: n == 1024)          # only the far N edge of the second box fails
    build = build_table(SPEC, [a, b], "interpret", lambda c: "k.py", fv, extend=[("N", 128, 1024), ("M", 1, 16)],
                        seed=0, interior=1)
    boxes = [{k: (r.lo, r.hi) for k, r in e.guard.axes.items()} for e in build.table.entries]
    assert boxes == [{"M": (1, 16), "N": (128, 384)}, {"M": (8, 8), "N": (512, 512)}]
    assert any(n.status == "RUNTIME_ERROR" and n.axes["N"] == 1024 for n in build.notes)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.sampled_from([64, 256, 300, 512]), dtypes, st.integers(0, 2)),
                min_size=1, max_size=8, unique_by=lambda t: (t[0], t[1], t[2])), st.integers(0, 3))
def test_two_axis_tables_partition_and_measured_shapes_hit_their_own_winner(specs, fail_every):
    winners = [_winner(m, n, d, {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4 * (k + 1)}) for m, n, d, k in specs]
    fv = BoxVerifier(bad=(lambda m, n: (m + n) % 11 == 0) if fail_every else (lambda m, n: False))
    b = build_table(SPEC, winners, "interpret", lambda c: "k.py", fv, extend=[("M", 1, 80), ("N", 32, 600)],
                    seed=1, interior=1)
    check_partition([e.guard for e in b.table.entries], b.table.axes)
    d = Dispatcher(b.table)
    for w in winners:
        idx = d.select(w.workload.dtype, "interpret", (w.workload.axes["M"], w.workload.axes["N"]))
        assert idx >= 0 and b.table.entries[idx].candidate_id == w.candidate.id
    for e in b.table.entries:   # a widened box was verified at its corners, and nothing inside it failed
        g = e.guard.axes
        if not (g["M"].exact and g["N"].exact):
            corners = {(m, n) for m in (g["M"].lo, g["M"].hi) for n in (g["N"].lo, g["N"].hi)}
            assert corners <= {(s.axes["M"], s.axes["N"]) for s in e.shapes}
            assert not any(fv.bad(m, n) for d, m, n in fv.seen if d == e.guard.dtype and m in g["M"] and n in g["N"])


def test_extend_takes_one_range_per_axis():
    from kernelloop.deliver.package.build import ExportError, parse_extend
    assert parse_extend(["M=1:64", "rmsnorm.N=128:1024", "gemm_nt.K=1:8"], SPEC) == [("M", 1, 64), ("N", 128, 1024)]
    with pytest.raises(ExportError, match="axis M"):
        parse_extend(["M=1:64", "rmsnorm.M=2:8"], SPEC)

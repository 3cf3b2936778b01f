"""A guard widened along two axes, verified by the real export-time verifier (the evaluator battery in an isolated
interpreter worker) at its edges along each axis and at its corners, then served by the dispatcher at those edges.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.base.records import Candidate, DType, Status, Trial, Verdict, Workload  # noqa: E402
from kernelloop.core.spec import load_op  # noqa: E402
from kernelloop.deliver.package.build import ShapeVerifier, Winner, build_table  # noqa: E402
from kernelloop.deliver.package.table import Dispatcher  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter test")


def test_a_two_axis_guard_is_verified_at_its_edges_in_the_interpreter(tmp_path):
    bundle = load_op(ops_dir() / "rmsnorm")
    config = {"PROGRAMS_PER_SM": 1, "num_warps": 1, "PREFETCH": 1}
    w = Workload(op="rmsnorm", axes={"M": 5, "N": 256}, dtype="fp16")
    c = Candidate(op="rmsnorm", template="persistent", source=bundle.template_sources["persistent"], config=config)
    t = Trial(run_id="r", index=0, candidate_id=c.id, workload_id=w.id, manifest_hash="m",
              verdict=Verdict(status=Status.PASSED), started=0, finished=0)
    verifier = ShapeVerifier(bundle, "interpret", tmp_path / "verify", checks=1)
    try:
        build = build_table(bundle.spec, [Winner(workload=w, candidate=c, trial=t, kernel_us=1.0, ci_us=(0.9, 1.1))],
                            "interpret", lambda cand: "kernels/persistent.py", verifier,
                            extend=[("M", 1, 8), ("N", 200, 300)], interior=0)
    finally:
        verifier.close()
    assert all(n.status == "PASSED" for n in build.notes), [(n.axes, n.message) for n in build.notes]
    (entry,) = build.table.entries
    assert {a: (r.lo, r.hi) for a, r in entry.guard.axes.items()} == {"M": (1, 8), "N": (200, 300)}
    verified = {(n.axes["M"], n.axes["N"]) for n in build.notes}
    assert {(1, 200), (1, 300), (8, 200), (8, 300)} <= verified                      # the corners
    assert {(1, 256), (2, 256), (7, 256), (8, 256), (5, 200), (5, 201), (5, 299), (5, 300)} <= verified
    d = Dispatcher(build.table)
    assert d.select(DType.fp16, "interpret", (8, 300)) == 0 and d.select(DType.fp16, "interpret", (1, 200)) == 0
    assert d.select(DType.fp16, "interpret", (9, 256)) == -1 and d.select(DType.fp16, "interpret", (5, 301)) == -1

"""The evaluator battery in the interpreter, shared by the gemm template tests: one candidate through the worker
(held-out shapes, repeats, timed-call re-checks with outputs and workspace poisoned before each), every workload
PASSED with a measurement."""

from kernelloop.core.bench.policy import policies_for
from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload


def assert_battery_passes(bundle, template: str, config: dict, cases, tmp_path) -> None:
    """`cases`: (axes, dtype) pairs of the bundle's op, each evaluated as a workload of its own."""
    op = bundle.spec.name
    cand = Candidate(op=op, template=template, source=bundle.template_sources[template], config=config)
    worker = Worker("interpret", tmp_path / "worker")
    try:
        ev = Evaluator(bundle, "interpret", worker, policies_for("interpret")[0], secret=template, checks=1)
        for axes, dtype in cases:
            w = Workload(op=op, axes=axes, dtype=dtype)
            # the job folder inside the worker's own (its read-only view keeps it writable): one worker for every case
            res = ev.evaluate(cand, w, worker.work_dir / f"job-{w.id}")
            assert res.verdict.status is Status.PASSED, \
                f"{w.label}: {res.verdict.status.value}: {res.verdict.message} (case {res.verdict.case})"
            assert res.measurement is not None
    finally:
        worker.close()

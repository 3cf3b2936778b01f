"""Stress the interpreter verification of honest kernels: every template of every op, many seeds, under CPU load.

    python benchmarks/verify_stress.py [--ops layernorm,softmax] [--seeds 20] [--load 1] [--secret-prefix P]
                                       [--json out.json]
    python benchmarks/verify_stress.py --first-call 60 [--dtype float32]

The first form runs the controller's verification battery (core/execute/evaluate.py `Evaluator.verify`: seeded and held-out
cases, repeats, the worker's copy of the inputs against the controller's regeneration) on each template's own source
with a configuration its pruning keeps, for each workload of the op's interpreter suite, `--seeds` times with another
run secret each time (so other seeds, distributions and held-out shapes), in a fresh worker per seed, while `--load`
busy processes spin. It counts verdicts by status, input regeneration drift noted in a verdict's log, and prints every
verdict that is not PASSED. An honest kernel must always pass; exit code 1 when one did not.

The second form counts fresh processes in which the first parallel call of torch's CPU `log` (MKL's vector math
library) returned other values than later calls of the same op in the same process: the cause of the honest kernels
once judged WRONG_INPUT_MUTATED, when inputs were drawn with torch's log (core/reference/inputs.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[1]

FIRST_CALL = """
import sys, torch
dt = getattr(torch, sys.argv[1])
g = torch.Generator().manual_seed(7)
u = torch.rand(64, 512, generator=g).clamp_min(1e-12).to(dt)
first = torch.log(u)
later = [torch.log(u) for _ in range(3)]
w = torch.int32 if dt == torch.float32 else torch.int64
same = all(torch.equal(x.view(w), later[0].view(w)) for x in later)
d = (first.view(w) != later[0].view(w)).flatten()
rel = float(((first - later[0]).abs() / later[0].abs().clamp_min(1e-30)).max())
print(int(d.sum()), int(d.nonzero()[0]) if d.any() else -1, rel, int(same))
"""


class StressRecord(BaseModel):
    """What one stress run did and saw."""

    ops: list[str]
    seeds: int = Field(description="run secrets per op, each with a fresh worker")
    load: int = Field(description="busy processes spinning during the run")
    verifications: int = Field(description="Evaluator.verify calls (one battery each)")
    cases: int = Field(description="battery cases run (each case is one or more candidate calls)")
    statuses: dict[str, int] = Field(description="verdicts by status")
    drift_notes: int = Field(description="verdicts whose log notes input regeneration drift")
    failures: list[str] = Field(default_factory=list, description="every verdict that was not PASSED")
    seconds: float


class FirstCallRecord(BaseModel):
    """Fresh processes whose first torch.log differed from its later calls."""

    processes: int
    dtype: str
    differed: int
    examples: list[str] = Field(default_factory=list, description="elements differing, first index, max rel diff")
    seconds: float


def op_folder(op: str) -> Path:
    try:
        from kernelloop.base.builtin import op_folder as builtin
        return builtin(op)
    except ImportError:
        return ROOT / "ops" / op


def stress(ops: list[str], seeds: int, load: int = 0, checks: int = 2, work: Path | None = None,
           secret_prefix: str = "stress", workloads_per_op: int | None = None, log=print) -> StressRecord:
    """Verify each op's templates (their own source, a configuration pruning keeps) on each interpreter workload,
    `seeds` times with another secret each time (the first `workloads_per_op` workloads, or all)."""
    from kernelloop.core.bench.policy import policies_for
    from kernelloop.core.device import device_properties
    from kernelloop.core.execute.evaluate import Evaluator
    from kernelloop.core.execute.pool import Worker
    from kernelloop.base.records import Candidate, Status
    from kernelloop.core.spec import load_op
    from kernelloop.core.spec.loader import load_workloads
    from kernelloop.core.spec.space import prune
    work = Path(work or tempfile.mkdtemp(prefix="verify-stress-"))
    props = device_properties("interpret")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    statuses: collections.Counter = collections.Counter()
    drift, verifications, ncases, failures = 0, 0, 0, []
    t0 = time.perf_counter()
    try:
        for op in ops:
            bundle = load_op(op_folder(op))
            workloads = load_workloads(bundle.folder / "workloads-interpret.toml", bundle.spec)[:workloads_per_op]
            for s in range(seeds):
                worker = Worker("interpret", work / f"worker-{op}-{s}")
                try:
                    ev = Evaluator(bundle, "interpret", worker, policies_for("interpret")[0],
                                   secret=f"{secret_prefix}-{op}-{s}", checks=checks)
                    for t in bundle.spec.templates:
                        for w in workloads:
                            configs, _ = prune(t, w, props)
                            if not configs:
                                continue
                            cand = Candidate(op=op, template=t.name, source=bundle.template_sources[t.name],
                                             config=configs[(s * 7919) % len(configs)])
                            job = worker.work_dir / "job"   # inside the worker's read-only view
                            job.mkdir(parents=True, exist_ok=True)
                            loaded = ev.load(cand)
                            if loaded is not None:
                                v_status, message, vlog = "IMPORT", str(loaded)[:300], ""
                            else:
                                ncases += len(ev.cases(cand, w))
                                _, v, _, _ = ev.verify(cand, w, job)
                                v_status, message, vlog = v.status.value, f"{v.message} [{v.case}]", v.log or ""
                            verifications += 1
                            statuses[v_status] += 1
                            if "regeneration drift" in vlog:
                                drift += 1
                            if v_status != Status.PASSED.value:
                                failures.append(f"{op}/{t.name} {w.label} {cand.config}: {v_status}: {message}")
                                log("NOT PASSED " + failures[-1])
                finally:
                    worker.close()
            log(f"{op}: {dict(statuses)} drift={drift} after {time.perf_counter() - t0:.0f} s")
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    return StressRecord(ops=ops, seeds=seeds, load=load, verifications=verifications, cases=ncases,
                        statuses=dict(statuses), drift_notes=drift, failures=failures,
                        seconds=round(time.perf_counter() - t0, 1))


def first_call(processes: int, dtype: str = "float32", parallel: int = 2) -> FirstCallRecord:
    """Run the first-call probe in `processes` fresh interpreters, `parallel` at a time."""
    t0 = time.perf_counter()
    differed, examples = 0, []
    running: list[subprocess.Popen] = []

    def reap(p: subprocess.Popen) -> None:
        nonlocal differed
        out = p.communicate()[0].split()
        if out and int(out[0]):
            differed += 1
            examples.append(f"{out[0]} elements, first at {out[1]}, max rel {float(out[2]):.2e}")
    for _ in range(processes):
        while len(running) >= parallel:
            reap(running.pop(0))
        running.append(subprocess.Popen([sys.executable, "-c", FIRST_CALL, dtype], stdout=subprocess.PIPE, text=True))
    for p in running:
        reap(p)
    return FirstCallRecord(processes=processes, dtype=dtype, differed=differed, examples=examples,
                           seconds=round(time.perf_counter() - t0, 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="layernorm,rmsnorm,softmax,gemm,gemm_bias_gelu,attention")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--load", type=int, default=1, help="busy background processes")
    ap.add_argument("--checks", type=int, default=2)
    ap.add_argument("--secret-prefix", default="stress", help="run secrets are PREFIX-<op>-<k>: another prefix, "
                                                               "other cases; the same one repeats them exactly")
    ap.add_argument("--first-call", type=int, default=0, help="run the first-call probe in this many processes")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    import torch
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "triton": __import__("triton").__version__, "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.first_call:
        rec = first_call(args.first_call, args.dtype)
        ok = True
    else:
        rec = stress(args.ops.split(","), args.seeds, args.load, args.checks, secret_prefix=args.secret_prefix)
        ok = not rec.failures
    out = {"environment": env, "record": rec.model_dump()}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

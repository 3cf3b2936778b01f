"""The steps of the build stage. Each takes one job (a candidate on a workload, with the shapes its verification
battery will run) and returns a `StepResult`: passed on, or a verdict that ends the trial before any GPU work.

Steps run in order; the first verdict ends the job. A step may also have `settle(job)`, called once the job's
steps are over however they ended (the static gate decides there on a job a compile error ended). Adding a step is the seam for what should happen before the GPU:
a static gate over a typed schedule, or a build for another candidate language, is a class with a `name` and a
`run(job, context)`, listed in `kernelloop.tune.loop.pipeline.default_steps` (or passed to `BuildStage(steps=...)`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from ...base.records import BuildArtifact, BuildFailure, BuildUsage, Candidate, OpSpec, Status, Verdict, Workload


@dataclass
class BuildJob:
    """One (candidate, workload) for the build stage; `shapes`: every distinct workload its battery runs."""

    candidate: Candidate
    workload: Workload
    shapes: list[Workload]
    sm_build: object = None        # kernelloop.core.build.aot.BuildOutcome of the compile step, for the steps after it
    gate_decision: object = None   # the static gate's decision waiting for that build (kernelloop.tune.gate.step)


@dataclass
class StepResult:
    """What a step made of a job: `outcome` ('passed', 'rejected', 'compile error', 'skipped', ...), a verdict that
    ends the trial, a compile failure, the artifact (compile seconds, resources), the cubins' sha256."""

    outcome: str = "passed"
    note: str = ""
    verdict: Verdict | None = None
    failure: BuildFailure | None = None
    artifact: BuildArtifact | None = None
    cubins: list[str] = field(default_factory=list)


@dataclass
class StepContext:
    """What steps share: the op's spec (and its JSON text, serialised once), this thread's build process."""

    spec: OpSpec
    spec_json: str
    server: object = None       # kernelloop.core.build.server.BuildServer of this build thread, started on first use
    number: int = 0             # which build thread


class BuildStep(Protocol):
    name: str

    def run(self, job: BuildJob, context: StepContext) -> StepResult: ...


class StaticRules:
    """The static source rules (kernelloop.core.verify.rules): a hit is REJECTED with the rule and line, before any
    candidate code runs. Verdicts are kept per source."""

    name = "static rules"

    def __init__(self):
        self._verdicts: dict[str, Verdict | None] = {}

    def run(self, job: BuildJob, context: StepContext) -> StepResult:
        key = job.candidate.source_hash
        if key not in self._verdicts:
            self._verdicts[key] = rules_verdict(job.candidate.source, context.spec)
        verdict = self._verdicts[key]
        if verdict is None:
            return StepResult()
        return StepResult("rejected", verdict.message, verdict=verdict.model_copy(
            update={"case": f"{job.workload.label}: static rules, before any call"}))


def rules_verdict(source: str, spec: OpSpec) -> Verdict | None:
    """REJECTED naming the first rule hit (and the others), None when the source breaks no rule."""
    from ..verify.rules import check_source
    hits = check_source(source, spec)
    if not hits:
        return None
    more = ", ".join(f"{h.rule} at line {h.line}" for h in hits[1:])
    return Verdict(status=Status.REJECTED, message=hits[0].message + (f" (and {more})" if more else ""),
                   log="\n".join(f"{h.rule} at line {h.line}: {h.snippet}" for h in hits))


class TritonCompile:
    """Compiles the candidate's Triton kernels for the GPU target in a build process (kernelloop.core.build.server), for
    each shape of its battery, without launching them: true compile seconds, the build's CPU time and memory, each
    kernel's registers, spills and shared memory. A compile error is COMPILE_ERROR here, before the GPU; a source
    whose Python refuses the configuration, or a build that hangs or crashes, is noted and left to the worker
    (whose verdict it has always been)."""

    name = "triton compile"

    def __init__(self, arch: int = 90, sm_count: int = 132, folder=None, timeout_s: float = 300.0):
        self.arch, self.sm_count, self.folder, self.timeout_s = arch, sm_count, folder, timeout_s

    def run(self, job: BuildJob, context: StepContext) -> StepResult:
        import triton

        from .server import BuildServer
        if context.server is None:
            context.server = BuildServer(self.folder / f"builder{context.number}", self.arch, self.sm_count,
                                         context.number)
        cand = job.candidate
        got = context.server.build(context.spec_json, cand.source, cand.source_hash, cand.config,
                                   [w.model_dump_json() for w in job.shapes], self.timeout_s)
        from .aot import BUILT, COMPILE_ERROR, BuildOutcome
        toolchain = f"triton {triton.__version__} / sm_{self.arch}"
        if got["status"] != "done":
            job.sm_build = BuildOutcome(cand.template, cand.config, got["status"], error=got["error"])
            return StepResult("not built", f"{got['status']}: {got['error']}"[:500])
        events = got["events"]
        errors = [e for e in events if e.get("status") == "compile_error"]
        seconds = sum(float(e.get("seconds", 0.0)) for e in events)
        if errors:
            first = errors[0]
            job.sm_build = BuildOutcome(cand.template, cand.config, COMPILE_ERROR, error=first.get("error", ""),
                                        seconds=seconds)
            failure = BuildFailure(stage="compile", log=first.get("error", ""), compile_s=seconds, toolchain=toolchain)
            return StepResult("compile error", first.get("error", "")[:500], failure=failure, verdict=Verdict(
                status=Status.COMPILE_ERROR, message=(first.get("error") or "compile failed")[:2000],
                case=f"{job.workload.label}: ahead-of-time build for sm_{self.arch}", log=first.get("error", "")))
        refused = [e for e in events if e.get("status") != "built"]
        kernels = [k for e in events for k in e.get("kernels", [])]
        if refused or not kernels:
            why = refused[0].get("error", "") if refused else "it compiled no Triton kernel"
            job.sm_build = BuildOutcome(cand.template, cand.config,
                                        refused[0].get("status", "not built") if refused else "no kernel", error=why)
            return StepResult("not built", f"left to the worker: {why}"[:500])
        job.sm_build = BuildOutcome(cand.template, cand.config, BUILT, kernels=kernels, seconds=seconds)
        usage = BuildUsage(process=context.number, wall_s=got["wall_s"], cpu_s=got["cpu_s"],
                           max_rss_bytes=got["max_rss_bytes"], workloads=len(job.shapes))

        def most(key: str) -> int | None:
            values = [int(k[key]) for k in kernels if k.get(key) is not None]
            return max(values) if values else None
        artifact = BuildArtifact(   # spills: the worker's introspection of the same binaries says (merge_build)
            kernel_names=sorted({k.get("name", "") for k in kernels}), registers=most("REG"),
            spills=None, shared_bytes=most("shared"), warps=most("num_warps"),
            compile_s=seconds, toolchain=toolchain, compiled_by="build stage", usage=usage,
            binary_hash=None)
        return StepResult("built", f"{len(kernels)} kernel(s) over {len(job.shapes)} shape(s) in {seconds:.2f} s",
                          artifact=artifact, cubins=sorted({k["cubin_sha256"] for k in kernels}))


def timed(step: BuildStep, job: BuildJob, context: StepContext) -> tuple[StepResult, float]:
    t0 = time.perf_counter()
    return step.run(job, context), time.perf_counter() - t0

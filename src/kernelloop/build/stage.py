"""The build stage: candidates are built on the host's CPU cores ahead of the GPU stage.

`BuildStage.submit(candidate, workload, shapes)` returns a future of a `records.Built`: the steps run in a thread of
the stage's pool (`jobs` threads, each with its own build process where a step needs one), so while the GPU verifies
and times one candidate the next ones are being built. The first verdict a step returns ends the trial before the
GPU; otherwise the GPU stage starts from the artifact (the kernels already in Triton's cache).

Default steps (`default_steps`): the static source rules; the static gate (kernelloop.gate: a schedule's barrier
protocol and footprint) unless the gate is off; on a GPU, the Triton compile for its architecture, and after it the
gate's check of that build (registers, spills, shared memory, occupancy against the device and the declared budget).
In the interpreter nothing is compiled: there is no compile step, the gate checks only what needs no build (and its
decisions say so), and the trial's build record says 'interpreter'.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..records import BuildStepRecord, Built, Candidate, OpSpec, Workload
from ..records.device import Device
from .steps import BuildJob, BuildStep, StaticRules, StepContext, TritonCompile, timed

MAX_JOBS = 8


def default_jobs() -> int:
    """Build threads (and processes): the host's CPU cores, at most MAX_JOBS."""
    return max(1, min(MAX_JOBS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
                      (os.cpu_count() or 1)))


def default_steps(device: Device, properties: dict, static_rules: bool, folder: Path,
                  timeout_s: float = 300.0, gate: str = "on") -> list[BuildStep]:
    """The static rules (unless turned off); the static gate (`gate` 'on'; 'audit': its decisions recorded, nothing
    rejected; 'off': none); then on a GPU the Triton compile for its architecture and the gate's check of its build.
    The gate holds builds to `properties` (the device's limits)."""
    from ..gate.step import StaticGate
    steps: list[BuildStep] = [StaticRules()] if static_rules else []
    static_gate = None
    if gate != "off":
        major, minor = properties.get("capability", [9, 0])
        static_gate = StaticGate(compiled=device.is_cuda, enforce=gate == "on", limits=properties,
                                 target=f"sm_{int(major) * 10 + int(minor)}",
                                 no_build="interpreter run: no sm_90 build, only the schedule's own checks")
        steps.append(static_gate)
    if device.is_cuda:
        major, minor = properties.get("capability", [9, 0])
        steps.append(TritonCompile(arch=int(major) * 10 + int(minor), sm_count=int(properties.get("sm_count", 132)),
                                   folder=folder, timeout_s=timeout_s))
        if static_gate is not None:
            steps.append(static_gate.build_check)
    return steps


class BuildStage:
    """A pool of build threads running `steps` over submitted jobs."""

    def __init__(self, spec: OpSpec, steps: list[BuildStep], jobs: int | None = None, folder: Path | None = None):
        self.spec = spec
        self.steps = steps
        self.jobs = jobs or default_jobs()
        self._own = folder is None
        self.folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="kernelloop-build-"))
        for step in steps:
            if getattr(step, "folder", "") is None:
                step.folder = self.folder
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="kernelloop-build")
        self._local = threading.local()
        self._contexts: list[StepContext] = []
        self._lock = threading.Lock()
        self._spec_json = spec.model_dump_json()

    @property
    def gate(self):
        """The static gate among the steps (kernelloop.gate.step.StaticGate), None without one."""
        from ..gate.step import StaticGate
        return next((s for s in self.steps if isinstance(s, StaticGate)), None)

    @property
    def compiles(self) -> bool:
        """Whether a step compiles (the GPU stage then starts from its artifacts)."""
        return any(isinstance(s, TritonCompile) for s in self.steps)

    def _context(self) -> StepContext:
        ctx = getattr(self._local, "context", None)
        if ctx is None:
            with self._lock:
                ctx = StepContext(self.spec, self._spec_json, number=len(self._contexts))
                self._contexts.append(ctx)
            self._local.context = ctx
        return ctx

    def submit(self, candidate: Candidate, workload: Workload, shapes: list[Workload]) -> "Future[Built]":
        return self._pool.submit(self._build, BuildJob(candidate, workload, shapes), time.perf_counter())

    def _build(self, job: BuildJob, submitted: float) -> Built:
        started = time.perf_counter()
        ctx = self._context()
        records, artifact, cubins = [], None, []
        try:
            for step in self.steps:
                result, seconds = timed(step, job, ctx)
                records.append(BuildStepRecord(step=step.name, seconds=seconds, outcome=result.outcome,
                                               note=result.note))
                artifact = result.artifact or artifact
                cubins += result.cubins
                if result.verdict is not None:
                    return Built(steps=records, verdict=result.verdict, failure=result.failure, artifact=artifact,
                                 cubins=cubins, queued_s=started - submitted,
                                 seconds=time.perf_counter() - submitted)
            return Built(steps=records, artifact=artifact, cubins=cubins, queued_s=started - submitted,
                         seconds=time.perf_counter() - submitted)
        finally:
            for step in self.steps:
                settle = getattr(step, "settle", None)
                if settle is not None:
                    settle(job)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        for ctx in self._contexts:
            if ctx.server is not None:
                ctx.server.close()
        if self._own:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "BuildStage":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

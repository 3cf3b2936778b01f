"""The build stage: candidates are built on the host's CPU cores ahead of the GPU stage.

`BuildStage.submit(candidate, workload, shapes)` returns a future of a `records.Built`: the steps run in a thread of
the stage's pool (`jobs` threads, each with its own build process where a step needs one), so while the GPU verifies
and times one candidate the next ones are being built. The first verdict a step returns ends the trial before the
GPU; otherwise the GPU stage starts from the artifact (the kernels already in Triton's cache).

The steps are the caller's (a run's: `kernelloop.tune.loop.pipeline.default_steps`, which adds the static gate of
kernelloop.tune.gate): the stage knows only the `BuildStep` seam (steps.py), so nothing here depends on a gate.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ...base.records import BuildStepRecord, Built, Candidate, OpSpec, Workload
from .steps import BuildJob, BuildStep, StepContext, TritonCompile, timed

MAX_JOBS = 8


def default_jobs() -> int:
    """Build threads (and processes): the host's CPU cores, at most MAX_JOBS."""
    return max(1, min(MAX_JOBS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
                      (os.cpu_count() or 1)))


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

    def find(self, kind: type) -> BuildStep | None:
        """The first step of type `kind` (e.g. the static gate, kernelloop.tune.gate.step.StaticGate), None without one."""
        return next((s for s in self.steps if isinstance(s, kind)), None)

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

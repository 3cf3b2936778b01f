"""The evaluation pipeline of a run: each asked candidate goes through the build stage (kernelloop.core.build: static
rules, gates, compilation on the host's CPU cores) and then to the executor (one worker per device), and comes back
as a future. Builds run as soon as a candidate is asked, so a device never waits for a build it could have had
earlier; what it did wait is measured (`build_wait_s`)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

from ...core.build.stage import BuildStage
from ...core.build.steps import BuildStep, StaticRules, TritonCompile
from ...core.device import device_properties
from ...core.execute.evaluate import Evaluator
from ...core.execute.executor import (EvalContext, EvalDone, EvalJob, Executor, LocalExecutor, forward,
                                resolve_devices)
from ...base.records import Candidate, Workload
from ...base.records.device import Device, DeviceProperties
from .options import RunOptions


def default_steps(device: Device, properties: DeviceProperties, static_rules: bool, folder: Path,
                  timeout_s: float = 300.0, gate: str = "on") -> list[BuildStep]:
    """The static rules (unless turned off); the static gate (`gate` 'on'; 'audit': its decisions recorded, nothing
    rejected; 'off': none); then on a GPU the Triton compile for its architecture and the gate's check of its build.
    The gate holds builds to `properties` (the device's limits)."""
    from ..gate.step import StaticGate
    steps: list[BuildStep] = [StaticRules()] if static_rules else []
    static_gate = None
    if gate != "off":
        major, minor = properties.capability
        static_gate = StaticGate(compiled=device.is_cuda, enforce=gate == "on", limits=properties,
                                 target=f"sm_{int(major) * 10 + int(minor)}",
                                 no_build="interpreter run: no sm_90 build, only the schedule's own checks")
        steps.append(static_gate)
    if device.is_cuda:
        major, minor = properties.capability
        steps.append(TritonCompile(arch=int(major) * 10 + int(minor), sm_count=properties.sm_count,
                                   folder=folder, timeout_s=timeout_s))
        if static_gate is not None:
            steps.append(static_gate.build_check)
    return steps


class Pipeline:
    """Build stage -> executor. `submit` returns a future of the EvalDone; jobs whose build ends the trial (a
    static rule, a gate, a compile error) never reach a device."""

    def __init__(self, context: EvalContext, options: RunOptions, run_dir: Path, executor: Executor | None = None,
                 build: BuildStage | None = None):
        self.context = context
        self.devices = resolve_devices(options.device, options.devices)
        self.build = build or BuildStage(context.bundle.spec, default_steps(
            options.device, device_properties(self.devices[0]), options.static_rules,
            Path(run_dir) / "build", options.timeouts.check, options.gate), jobs=options.build_jobs)
        self._building = 0
        self._seq = 0
        self._lock = threading.Lock()
        if options.screen_samples and options.executor != "local":
            raise ValueError("screened timing (screen_samples) needs the local executor: its successive halving "
                             "decides in the controller's process, between a candidate's screen and its full timing")
        self.executor = executor or make_executor(options, context, self.devices, run_dir, self.building)
        # decides nothing itself: computes each candidate's battery shapes and turns build verdicts into evaluations
        self.local = context.evaluator(self.devices[0], None)

    def building(self) -> bool:
        return self._building > 0

    @property
    def slots(self) -> int:
        return self.executor.slots

    def window(self, options: RunOptions, asks_ahead: bool) -> int:
        """Candidates in flight: RunOptions.in_flight, else the devices (twice that where builds run ahead);
        1 for a proposer that must hear every result before its next ask."""
        if not asks_ahead:
            return 1
        if options.in_flight is not None:
            return options.in_flight
        return self.slots * (2 if self.build.compiles else 1)

    def submit(self, candidate: Candidate, workload: Workload, halving=None) -> "Future[EvalDone]":
        """The future of the candidate's evaluation; `halving` (kernelloop.tune.search.budget): screen its timing first."""
        out: Future = Future()
        with self._lock:
            self._building += 1
            self._seq += 1
            seq = self._seq
        built = self.build.submit(candidate, workload, self.local.shapes(candidate, workload))

        def after_build(f: Future) -> None:
            with self._lock:
                self._building -= 1
            try:
                b = f.result()
            except BaseException as e:  # noqa: BLE001 - the controller decides what an error means
                out.set_exception(e)
                return
            if b.verdict is not None:   # ends here: nothing reaches a device
                import time
                now = time.time()
                out.set_result(EvalDone(seq, self.local.evaluate(candidate, workload, Path("."), built=b), "",
                                        now, now))
                return
            job = self.executor.submit(EvalJob(seq=seq, candidate=candidate, workload=workload, built=b),
                                       halving=Halving(halving, self._lock) if halving is not None else None)
            job.add_done_callback(lambda j: forward(j, out))
        built.add_done_callback(after_build)
        return out

    def gate_decisions(self) -> list:
        """The static gate's decisions since the last call (kernelloop.tune.gate.GateDecision; none without a gate)."""
        from ..gate.step import StaticGate
        gate = self.build.find(StaticGate)
        return gate.drain() if gate is not None else []

    def build_wait_s(self) -> float:
        return self.executor.waited_for_builds_s()

    def close(self) -> None:
        try:
            self.build.close()
        finally:
            self.executor.close()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Halving:
    """A workload's successive halving shared by the devices' threads: one promotion decision at a time."""

    def __init__(self, halving, lock):
        self.halving, self.lock, self.screen_samples = halving, lock, halving.screen_samples

    def promote(self, screen_value: float) -> bool:
        with self.lock:
            return self.halving.promote(screen_value)


def make_executor(options: RunOptions, context: EvalContext, devices, run_dir: Path, building) -> Executor:
    """The executor the options name: local worker processes (default) or Ray actors."""
    if options.executor == "ray":
        from ...core.execute.ray_executor import RayExecutor
        return RayExecutor(context, devices, run_dir, waiting_on_builds=building)
    return LocalExecutor(context, devices, run_dir, waiting_on_builds=building)

"""Executors: where evaluations run. One evaluation worker per device (a GPU, a MIG slice, or an interpreter worker
on the CPU), jobs scheduled across them, each device doing one job at a time, so timing stays exclusive per device
(never two timed kernels on one GPU) and every result says which device it came from.

`Executor` is the interface the controller uses (`submit(job) -> Future[EvalDone]`, `close()`); `LocalExecutor`
(the default) runs one worker process per device on this host, driven by one thread each; `RayExecutor`
(core/execute/ray_executor.py, the `cluster` extra) runs one actor per device across a Ray cluster. Either way the
controller and its archive stay single and authoritative: an executor only returns evaluations.

Devices of one run are of one model (`check_one_model`): results are compared only within one device model and one
manifest.
"""

from __future__ import annotations

import os
import queue
from abc import ABC, abstractmethod
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...base.records import Built, Candidate, Record, TimingPolicy, Workload
from ...base.records.device import Device
from ..spec import OpBundle
from .evaluate import Evaluation, Evaluator, Timeouts


@dataclass
class EvalContext:
    """What every device's evaluator is made from: the op, the timing policy, the run's secret (the battery's seeds
    derive from it: it never reaches a worker process), checks, deadlines, whether the static rules run."""

    bundle: OpBundle
    policy: TimingPolicy
    secret: str
    checks: int = 2
    timeouts: Timeouts | None = None
    static_rules: bool = True

    def evaluator(self, device: Device, worker) -> Evaluator:
        return Evaluator(self.bundle, device, worker, self.policy, self.secret, self.checks, self.timeouts,
                         static_rules=self.static_rules)


class EvalJob(Record):
    """One evaluation: the candidate on the workload, after the build stage (`built`; None: the worker builds)."""

    seq: int
    candidate: Candidate
    workload: Workload
    built: Built | None = None


@dataclass
class EvalDone:
    """An evaluation and where and when it ran."""

    seq: int
    evaluation: Evaluation
    device: str
    started: float
    finished: float


class Executor(ABC):
    """Runs evaluation jobs on its devices, one job per device at a time (LocalExecutor, ray_executor.RayExecutor)."""

    devices: list[Device]

    @property
    def slots(self) -> int:
        return len(self.devices)

    @abstractmethod
    def submit(self, job: EvalJob, halving=None) -> "Future[EvalDone]":
        """Run `job` on a free device; `halving`: screened timing (kernelloop.tune.search.budget), local executors only."""

    @abstractmethod
    def close(self) -> None:
        """End the workers; jobs not yet started are not run."""

    def waited_for_builds_s(self) -> float:
        """Seconds a device sat idle while jobs were still in the build stage."""
        return 0.0


def check_one_model(names: dict[str, str]) -> None:
    """Refuse devices of different models in one run (`names`: device -> model name)."""
    models = sorted(set(names.values()))
    if len(models) > 1:
        listed = ", ".join(f"{d}: {n}" for d, n in names.items())
        raise ValueError(f"devices of different models ({listed}): results are compared only within one device "
                         f"model; choose devices of one model")


def resolve_devices(kind: Device, given: list[Device] | None) -> list[Device]:
    """The devices a run uses: `given`; else the device `kind` names when it names one ('cuda:1', 'interpret:0');
    else on cuda every visible GPU of GPU 0's model (the default GPU alone when there is one), in the interpreter one
    interpreter worker. GPUs given must exist, be of one model and be GPUs this process addresses (a
    UUID it does not see is refused: the controller regenerates each case's inputs on the worker's GPU)."""
    if not given and (kind.index is not None or kind.uuid is not None):
        given = [kind]
    if not kind.is_cuda:
        devices = given or [Device(kind="interpret")]
        if any(d.is_cuda for d in devices):
            raise ValueError("the interpreter runs on interpreter workers (interpret:N), not GPUs")
        return devices
    import torch
    count = torch.cuda.device_count()
    if given:
        for d in given:
            if not d.is_cuda:
                raise ValueError(f"device {d}: a cuda run runs on GPUs")
            if d.index is not None and d.index >= count:
                raise ValueError(f"device {d}: this host has {count} GPU(s)")
            if d.controller_tensor_device == "cpu":
                # the controller regenerates every case's inputs on the worker's GPU with its generator: on the CPU
                # they would differ from the worker's draws and every honest kernel would be judged wrong
                raise ValueError(f"device {d}: this process sees no GPU of UUID {d.uuid} among its {count} "
                                 f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); the "
                                 f"controller must address every device it runs on: make it visible to the "
                                 f"controller, or name it by ordinal")
        check_one_model({str(d): torch.cuda.get_device_name(d.controller_tensor_device) for d in given})
        return list(given)
    if count <= 1:
        return [Device(kind="cuda")]
    first = torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0)
    return [Device(kind="cuda", index=i) for i in range(count)
            if (torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i)) == first]


class LocalExecutor(Executor):
    """One worker process per device on this host, each driven by a thread of the controller's process; jobs go to
    whichever device is free, in the order they were submitted."""

    def __init__(self, context: EvalContext, devices: list[Device], run_dir: Path,
                 waiting_on_builds: Callable[[], bool] = lambda: False):
        from .pool import Worker, job_root
        self.context = context
        self.devices = list(devices)
        self.run_dir = Path(run_dir)
        self._queue: queue.Queue = queue.Queue()
        self._waiting_on_builds = waiting_on_builds
        self._build_wait = 0.0
        self._lock = threading.Lock()
        root = job_root(self.run_dir)
        self.evaluators: list[Evaluator] = []
        for i, device in enumerate(self.devices):
            log = self.run_dir / ("worker.log" if i == 0 else f"worker-{i}.log")
            work = root if len(self.devices) == 1 else root / f"device-{i}"
            self.evaluators.append(context.evaluator(device, Worker(device, work, log_path=log,
                                                                     remove_work_dir=True)))
        self._root = root
        self._threads = [threading.Thread(target=self._slot, args=(ev,), daemon=True,
                                          name=f"kernelloop-device-{ev.device}") for ev in self.evaluators]
        for t in self._threads:
            t.start()

    def submit(self, job: EvalJob, halving=None) -> "Future[EvalDone]":
        fut: Future = Future()
        self._queue.put((job, fut, halving))
        return fut

    def _slot(self, evaluator: Evaluator) -> None:
        while True:
            t0 = time.monotonic()
            building = self._waiting_on_builds()
            item = self._queue.get()
            if building:
                with self._lock:
                    self._build_wait += time.monotonic() - t0
            if item is None:
                return
            job, fut, halving = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(run_job(evaluator, job, halving))
            except BaseException as e:  # noqa: BLE001 - handed to the controller, which decides
                fut.set_exception(e)

    def waited_for_builds_s(self) -> float:
        return self._build_wait

    def close(self) -> None:
        while True:   # jobs never started are cancelled
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].cancel()
        for _ in self._threads:
            self._queue.put(None)
        for ev in self.evaluators:
            ev.worker.kill()   # a job still running ends with its worker
        for t in self._threads:
            t.join(timeout=60)
        for ev in self.evaluators:
            ev.worker.close()
        if len(self.devices) > 1:
            import shutil
            shutil.rmtree(self._root, ignore_errors=True)


def forward(source: Future, target: Future) -> None:
    """Settle `target` as `source` was settled (a done callback)."""
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())
    else:
        target.set_result(source.result())


def run_job(evaluator: Evaluator, job: EvalJob, halving=None) -> EvalDone:
    """Evaluate one job with an evaluator (its worker started on first use)."""
    started = time.time()
    job_dir = evaluator.worker.work_dir / f"{job.candidate.id}-{job.workload.id}"
    ev = evaluator.evaluate(job.candidate, job.workload, job_dir, built=job.built, halving=halving)
    return EvalDone(job.seq, ev, str(evaluator.device), started, time.time())

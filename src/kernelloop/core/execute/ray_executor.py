"""The Ray executor (the `cluster` extra): one actor per device across a Ray cluster, each driving its own worker
process exactly as the local executor's threads do (core/execute/executor.py).

The controller and its archive stay single and authoritative: actors only return evaluations, which the controller
archives in submission order. A GPU actor asks Ray for one GPU (`num_gpus=1`: Ray pins it and sets the actor's
CUDA_VISIBLE_DEVICES); an interpreter actor for one CPU. An actor that is lost (its process or node died) has its
job put back at the head of the queue and its partial result discarded; a replacement actor is started, and the
job runs again from the start (fresh inputs are drawn from the same seeds: the verdict does not depend on where it
ran).

What an actor needs travels with its first call: the op (spec, template sources, the op folder's path -- a cluster
shares it, e.g. on a network file system), the timing policy and the run's secret (the battery's seeds derive from
it; actors are the controller's own processes, never the candidate's, which run in their workers as locally).
Devices of one run are of one model: an actor on another model is refused (`check_one_model`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Callable

from ...base.records.device import Device
from .executor import EvalContext, EvalDone, EvalJob, Executor, check_one_model, forward, run_job

HEAD = "KERNELLOOP_RAY_ADDRESS"   # a running cluster to join (else: `RAY_ADDRESS`, else a local one is started)


class DeviceActor:
    """One device's evaluation actor: a worker process and the evaluator that drives it."""

    def __init__(self, context: EvalContext, kind: str, number: int):
        from .pool import Worker, job_root
        device = Device(kind=kind)   # an actor sees only its own GPU (Ray sets CUDA_VISIBLE_DEVICES)
        work = job_root(Path(tempfile.gettempdir())) / f"actor-{number}"
        self.evaluator = context.evaluator(device, Worker(device, work, remove_work_dir=True))
        self.label = f"{kind}:{number}@{os.uname().nodename}"

    def model(self) -> str:
        """The GPU's name (or 'interpret'), to check one model per run."""
        if self.evaluator.device.is_cuda:
            import torch
            return torch.cuda.get_device_name(0)
        return "interpret"

    def run(self, job: EvalJob) -> EvalDone:
        done = run_job(self.evaluator, job)
        done.device = self.label
        return done

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.evaluator.worker.close()


def ray_available() -> str | None:
    """None when Ray imports, else why not."""
    try:
        import ray  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"ray does not import ({type(e).__name__}: {e}); install the cluster extra: pip install 'kernelloop[cluster]'"
    return None


class RayExecutor(Executor):
    """One Ray actor per device; jobs go to whichever actor is free, a lost actor's job runs again elsewhere."""

    def __init__(self, context: EvalContext, devices: list[Device], run_dir: Path,
                 waiting_on_builds: Callable[[], bool] = lambda: False, address: str | None = None):
        why = ray_available()
        if why:
            raise RuntimeError(why)
        import ray
        self.ray = ray
        self.devices = list(devices)
        self.context = context
        self._kind = devices[0].kind_only   # the actors' device: its kind (one GPU or interpreter each)
        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            address = address or os.environ.get(HEAD) or os.environ.get("RAY_ADDRESS")
            env = {k: v for k in ("PYTHONPATH", "KERNELLOOP_SANDBOX", "KERNELLOOP_READONLY_VIEW", "TRITON_CACHE_DIR")
                   if (v := os.environ.get(k))}
            ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
                     **({} if address else {"num_cpus": max(2, len(devices))}),
                     runtime_env={"env_vars": env} if env else None)
        self._remote = ray.remote(num_gpus=1 if self._kind.is_cuda else 0, num_cpus=1, max_restarts=0)(DeviceActor)
        self._numbers = iter(range(10 ** 6))
        self.actors = [self._new_actor() for _ in devices]
        models = ray.get([a.model.remote() for a in self.actors])
        check_one_model({str(i): m for i, m in enumerate(models)})
        self.lost = 0
        self._queue: queue.Queue = queue.Queue()
        self._retry: list = []
        self._waiting_on_builds = waiting_on_builds
        self._build_wait = 0.0
        self._closing = False
        self._thread = threading.Thread(target=self._dispatch, daemon=True, name="kernelloop-ray")
        self._thread.start()

    def _new_actor(self):
        return self._remote.remote(self.context, str(self._kind), next(self._numbers))

    def submit(self, job: EvalJob, halving=None) -> "Future[EvalDone]":
        if halving is not None:   # its promotion decision lives in the controller's process
            raise ValueError("screened timing needs the local executor")
        fut: Future = Future()
        self._queue.put((job, fut))
        return fut

    def _next(self, block: bool):
        if self._retry:
            return self._retry.pop(0)
        try:
            return self._queue.get(block=block, timeout=0.05 if block else None)
        except queue.Empty:
            return None

    def _dispatch(self) -> None:
        ray = self.ray
        free = list(self.actors)
        running: dict = {}   # object ref -> (actor, job, future)
        idle_since = None
        while not self._closing or running:
            while free and not self._closing:
                item = self._next(block=not running)
                if item is None:
                    break
                job, fut = item
                if not fut.set_running_or_notify_cancel():
                    continue
                actor = free.pop(0)
                running[actor.run.remote(job)] = (actor, job, fut)
            now = time.monotonic()
            if free and not running and self._waiting_on_builds():
                idle_since = idle_since or now
            elif idle_since is not None:
                self._build_wait += now - idle_since
                idle_since = None
            if not running:
                continue
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.1)
            for ref in ready:
                actor, job, fut = running.pop(ref)
                try:
                    fut.set_result(ray.get(ref))
                    free.append(actor)
                except ray.exceptions.RayActorError:
                    # the actor (or its node) is gone: its partial result is discarded, the job runs again first
                    self.lost += 1
                    again: Future = Future()
                    again.add_done_callback(lambda f, fut=fut: forward(f, fut))
                    self._retry.insert(0, (job, again))
                    self.actors = [a for a in self.actors if a is not actor]
                    if not self._closing:
                        replacement = self._new_actor()
                        self.actors.append(replacement)
                        free.append(replacement)
                except BaseException as e:  # noqa: BLE001 - the controller decides
                    fut.set_exception(e)
                    free.append(actor)

    def waited_for_builds_s(self) -> float:
        return self._build_wait

    def close(self) -> None:
        """Queued jobs are cancelled; idle actors close their workers; a job still running is abandoned (the
        controller is stopping) with its actor."""
        self._closing = True
        while (item := self._next(block=False)) is not None:
            item[1].cancel()
        for actor in self.actors:
            with contextlib.suppress(Exception):   # busy with an abandoned job, or already gone
                self.ray.get(actor.close.remote(), timeout=5)
            self.ray.kill(actor)
        self._thread.join(timeout=120)
        for _, fut in self._retry:
            fut.cancel()
        if self._started_ray:
            self.ray.shutdown()

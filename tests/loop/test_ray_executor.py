"""The Ray executor on a local cluster of CPU workers (interpreter mode): the same archive as the single local
executor, even though the actors are lost during the run (a lost actor's job runs again on a replacement, its
partial result discarded)."""

import os
import signal

import pytest

from kernelloop.core.execute import ray_executor
from kernelloop.core.execute.ray_executor import ray_available
from modes import modes_op, run_archive, single  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(ray_available() is not None, reason=str(ray_available()))


def test_ray_actors_give_the_single_local_executors_archive_even_after_losing_them(modes_op, single, tmp_path,
                                                                                    monkeypatch):
    made, pids, killed = [], {}, []
    real_init = ray_executor.RayExecutor.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        made.append(self)
        for n, actor in enumerate(self.actors):
            pids[n] = self.ray.get(actor.pid.remote())

    def after_first_trial(progress):
        # every actor's process dies: the job running on one, or the next one sent to one, finds it gone
        if progress.done == 1 and not killed:
            for pid in pids.values():
                os.kill(pid, signal.SIGKILL)
            killed.extend(pids)

    monkeypatch.setattr(ray_executor.RayExecutor, "__init__", init)
    ray = run_archive(modes_op, tmp_path / "ray", monkeypatch, on_progress=after_first_trial, executor="ray",
                      devices=["interpret:0", "interpret:1"])
    assert [t[:6] for t in ray] == [t[:6] for t in single]
    assert all("@" in t[6] for t in ray)   # device and node of the actor that ran it
    assert killed and made[0].lost >= 1
    assert int(ray[-1][6].split(":")[1].split("@")[0]) >= 2   # a replacement ran the lost job from its start

"""GPU tier: a search through the whole pipeline on a real CUDA device -- the build stage compiling ahead on the
CPU, the executor's worker thread, the probe that decides how the worker's tensors come back -- with every honest
trial PASSED, its transport recorded and the build stage's binaries the ones the worker ran."""

import pytest

from kernelloop.deliver.api import optimize
from kernelloop.core.archive import Archive
from kernelloop.tune.loop.controller import TRANSPORT_EVENT
from kernelloop.base.records import Status, Workload

pytestmark = pytest.mark.gpu


def test_a_cuda_search_verifies_and_times_through_the_pipeline(layernorm, tmp_path):
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype="fp16")
    run = optimize(layernorm.folder, [w], budget=3, device="cuda", strategy="exhaustive", out=tmp_path / "run",
                   templates=["rowwise"], fixed="BLOCK_N=4096,ROWS=1,EVICT_FIRST=0,STREAM_STORE=0", confirm=False,
                   sanitize=False, in_flight=2, devices=1)
    trials = run.trials()
    assert len(trials) == 3
    assert all(t.verdict.status is Status.PASSED for t in trials), [t.verdict for t in trials]
    assert all(t.measurement is not None and t.measurement.kernel.median_us > 0 for t in trials)
    transports = {t.transport for t in trials}
    assert transports <= {"cuda-ipc", "host-arena"} and len(transports) == 1, transports
    for t in trials:
        assert t.build.compiled_by == "build stage" and t.build.ahead_used is True, t.build
    (device,) = run.throughput().devices
    assert device.transports == {transports.pop(): 3}
    with Archive(run.path, readonly=True) as a:
        said = a.events(run.id, TRANSPORT_EVENT)
    # a host arena on a GPU is never silent: the run says why CUDA IPC was not used
    assert bool(said) == (trials[0].transport == "host-arena")
    assert all(e["payload"]["reason"] for e in said)

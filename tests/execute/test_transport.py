"""Which transport an evaluator asks its worker for (execute/transport.py): on a GPU a probe decides CUDA IPC once,
before the first request that shares tensors; where it is refused -- the worker cannot export, this process cannot
open the handle, or the controller does not address the GPU -- the host arena is asked for, and the evaluation says
why. A worker stands in for a GPU's (no GPU is needed): it answers the requests and records them."""

import pytest
import torch

from kernelloop.bench.policy import COLD_L2_EVENTS
from kernelloop.execute import protocol as P
from kernelloop.execute.evaluate import Evaluator
from kernelloop.execute.pool import Reply
from kernelloop.execute.shared import SharedTensor
from kernelloop.records import Candidate, Status, Workload

WL = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp32")
CANDIDATE = "def launch(x, weight, bias, y, *, eps, **config):\n    y.copy_(x)\n"


class _FakeWorker:
    """Answers the evaluator's requests as a GPU worker would, recording them."""

    def __init__(self, share: P.Shared):
        self.share, self.sent = share, []

    def request(self, msg, timeout):
        self.sent.append(msg)
        if isinstance(msg, P.ShareRequest):
            return Reply("ok", self.share)
        if isinstance(msg, P.LoadRequest):
            return Reply("ok", P.Loaded())
        return Reply("error", P.Failed(stage="runtime", error="stop here", case=0))


@pytest.fixture
def hopper(monkeypatch):
    import kernelloop.device as dev
    monkeypatch.setattr(dev, "device_properties", lambda device: dict(dev.VIRTUAL_HOPPER))


BROKEN = SharedTensor(transport="cuda-ipc", dtype="float32", shape=[8], stride=[1],
                      ipc=[[8], [1], 0, 0, b"not a handle", 32, 0, b"/none", 0, None, False])


@pytest.mark.parametrize("share,why", [(P.Shared(error="RuntimeError: no IPC"), "could not export"),
                                       (P.Shared(tensor=BROKEN), "could not open")])
def test_a_refused_cuda_ipc_asks_for_the_host_arena_and_the_evaluation_says_why(layernorm, tmp_path, hopper,
                                                                                share, why):
    worker = _FakeWorker(share)
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s", static_rules=False)
    cand = Candidate(op="layernorm", template="custom", source=CANDIDATE)
    out = ev.evaluate(cand, WL, tmp_path / "job")
    assert out.verdict.status is Status.RUNTIME_ERROR and "stop here" in out.verdict.message
    kinds = [type(m).__name__ for m in worker.sent]
    assert kinds == ["LoadRequest", "ShareRequest", "CheckRequest"]   # probed once, before the first check
    assert worker.sent[-1].transport == "host-arena"
    assert out.transport == "host-arena" and why in out.transport_note
    ev.evaluate(cand, WL, tmp_path / "job2")
    assert [type(m).__name__ for m in worker.sent].count("ShareRequest") == 1


def test_the_transport_asked_for_by_device(layernorm, hopper):
    ev = Evaluator(layernorm, "interpret", None, COLD_L2_EVENTS, secret="s")
    assert ev.transport == "arena"
    off = Evaluator(layernorm, "cuda", None, COLD_L2_EVENTS, secret="s", cuda_ipc=False)
    assert off.transport == "host-arena" and "turned off" in off.transport_note
    # a MIG slice the controller does not address: no probe, the host arena
    worker = _FakeWorker(P.Shared(error="unused"))
    mig = Evaluator(layernorm, "cuda:MIG-4c1d", worker, COLD_L2_EVENTS, secret="s")
    mig.transports.decide(lambda msg: worker.request(msg, 1.0))
    assert mig.transport == "host-arena" and not worker.sent and "does not address" in mig.transport_note


class _FakeBenchWorker(_FakeWorker):
    """Times nothing: the first answer's snapshot comes by a CUDA IPC handle this process cannot open, the next by
    a host arena."""

    def __init__(self, arena):
        super().__init__(P.Shared(error="unused"))
        self.arena = arena

    def request(self, msg, timeout):
        self.sent.append(msg)
        census = P.ThreadCensus(base=3, after=3)
        if msg.transport == "cuda-ipc":
            return Reply("ok", P.Benched(samples={}, threads=census, transport="cuda-ipc",
                                         snapshots=[P.Snapshot(call=1, seed=3, outputs=[BROKEN])]))
        return Reply("ok", P.Benched(samples={}, threads=census, transport=msg.transport,
                                     snapshots=[P.Snapshot(call=1, seed=3, outputs=self.arena.records)]))


def test_timed_snapshots_a_process_cannot_open_are_timed_again_through_the_host_arena(layernorm, tmp_path, hopper):
    from kernelloop.execute.shared import Arena
    arena = Arena(tmp_path / "timed.arena", [torch.arange(8, dtype=torch.float32)])
    worker = _FakeBenchWorker(arena)
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s")
    ev.transports.ipc = True   # as after a probe that passed
    cand = Candidate(op="layernorm", template="custom", source=CANDIDATE)
    _, _, reply = ev.bench(cand, WL, ["candidate"], COLD_L2_EVENTS, tmp_path)
    assert [m.transport for m in worker.sent] == ["cuda-ipc", "host-arena"]
    assert reply.status == "ok" and reply.record.transport == "host-arena"
    assert ev.transport == "host-arena" and "could not open" in ev.transport_note

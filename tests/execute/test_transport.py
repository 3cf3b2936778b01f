"""Which transport an evaluator asks its worker for (core/execute/transport.py): on a GPU a probe decides CUDA IPC once,
before the first request that shares tensors; where it is refused -- the worker cannot export, this process cannot
open the handle, or the controller does not address the GPU -- the host arena is asked for, and the evaluation says
why. A worker stands in for a GPU's (no GPU is needed): it answers the requests and records them."""

import pytest
import torch

from kernelloop.core.bench.policy import COLD_L2_EVENTS
from kernelloop.core.execute import protocol as P
from kernelloop.core.execute.aten import AtenCall
from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.core.execute.pool import Reply
from kernelloop.core.execute.shared import SharedTensor
from kernelloop.base.records import Candidate, Status, Workload

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
    import kernelloop.core.device as dev
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
    assert kinds == ["ShareRequest", "LoadRequest", "CheckRequest"]   # probed once, before the first load
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
    from kernelloop.core.execute.shared import Arena
    arena = Arena(tmp_path / "timed.arena", [torch.arange(8, dtype=torch.float32)])
    worker = _FakeBenchWorker(arena)
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s")
    ev.transports.ipc = True   # as after a probe that passed
    cand = Candidate(op="layernorm", template="custom", source=CANDIDATE)
    _, _, reply = ev.bench(cand, WL, ["candidate"], COLD_L2_EVENTS, tmp_path)
    assert [m.transport for m in worker.sent] == ["cuda-ipc", "host-arena"]
    assert reply.status == "ok" and reply.record.transport == "host-arena"
    assert ev.transport == "host-arena" and "could not open" in ev.transport_note


class _ReplacedWorker:
    """A GPU worker stand-in that, as pool.Worker does, is replaced (losing every loaded module) when a request
    times out or it is killed; a check or bench of a candidate it has not loaded is answered as worker.py does."""

    def __init__(self):
        self.sent, self.loaded = [], set()

    def kill(self):
        self.loaded.clear()

    def request(self, msg, timeout):
        self.sent.append(msg)
        if isinstance(msg, P.ShareRequest):
            self.kill()   # the probe timed out: the worker is killed, the next request starts a fresh one
            return Reply("timeout")
        if isinstance(msg, P.LoadRequest):
            self.loaded.add(msg.source_hash)
            return Reply("ok", P.Loaded())
        if msg.source_hash not in self.loaded:
            return Reply("error", P.not_loaded(msg.source_hash))
        if isinstance(msg, P.BenchRequest):
            return Reply("ok", P.Benched(samples={}, threads=P.ThreadCensus(base=3, after=3)))
        return Reply("error", P.Failed(stage="runtime", error="stop here", case=0))


def test_the_transport_is_probed_before_the_load_so_a_failed_probe_loses_no_candidate(layernorm, tmp_path, hopper):
    worker = _ReplacedWorker()
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s", static_rules=False)
    out = ev.evaluate(Candidate(op="layernorm", template="custom", source=CANDIDATE), WL, tmp_path / "job")
    assert [type(m).__name__ for m in worker.sent] == ["ShareRequest", "LoadRequest", "CheckRequest"]
    assert out.verdict.status is Status.RUNTIME_ERROR and "stop here" in out.verdict.message
    assert out.transport == "host-arena" and "no answer" in out.transport_note


def test_a_worker_replaced_since_the_load_gets_the_candidate_again_once(layernorm, tmp_path, hopper):
    worker = _ReplacedWorker()
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s", static_rules=False)
    ev.transports.ipc = True   # decided before
    cand = Candidate(op="layernorm", template="custom", source=CANDIDATE)
    assert ev.load(cand) is None
    worker.kill()             # e.g. replaced after a fault, or for a fresh confirmation process
    _, _, reply = ev.bench(cand, WL, ["candidate"], COLD_L2_EVENTS, tmp_path)
    assert reply.status == "ok", reply.record
    assert [type(m).__name__ for m in worker.sent] == ["LoadRequest", "BenchRequest", "LoadRequest", "BenchRequest"]
    # a worker that loses it at every check: loaded once more, then the answer stands (no loop)
    del worker.sent[:]
    inner = worker.request
    worker.request = lambda msg, timeout: (worker.kill(), inner(msg, timeout))[1] \
        if isinstance(msg, P.CheckRequest) else inner(msg, timeout)
    out = ev.evaluate(cand, WL, tmp_path / "job")
    assert out.verdict.status is Status.RUNTIME_ERROR and P.NOT_LOADED in out.verdict.message
    assert [type(m).__name__ for m in worker.sent] == ["LoadRequest", "CheckRequest", "LoadRequest", "CheckRequest"]


def _exports(n: int, first: int = 0) -> list[SharedTensor]:
    """CUDA IPC records, each of its own buffer handle (b'h<k>') and reference counter offset k."""
    return [SharedTensor(transport="cuda-ipc", dtype="float32", shape=[4, 64], stride=[64, 1],
                         ipc=[[4, 64], [64, 1], 0, 0, f"h{k}".encode(), 1024, 0, b"/ref", k, None, False])
            for k in range(first, first + n)]


@pytest.fixture
def opens(monkeypatch):
    """What this process opens of the worker's CUDA IPC exports (by buffer handle) and whose counts it lowers
    without opening (by counter offset); `refuse` makes every open fail."""
    import types
    seen = types.SimpleNamespace(opened=[], lowered=[], refuse=False)

    def read(self, device="cpu", gpu=None, maps=None):
        if seen.refuse:
            raise RuntimeError("cudaIpcOpenMemHandle: invalid resource handle")
        seen.opened.append(self.ipc[4])
        return torch.zeros(self.shape)
    monkeypatch.setattr(SharedTensor, "read", read)
    monkeypatch.setattr(torch.UntypedStorage, "_release_ipc_counter",
                        classmethod(lambda cls, handle, offset, device=None: seen.lowered.append(offset)))
    return seen


class _EarlyVerdictWorker(_FakeWorker):
    """Answers the check with every case's tensors exported by CUDA IPC and what earns an early verdict."""

    def __init__(self, early: dict):
        super().__init__(P.Shared(error="unused"))
        self.early, self.exported = early, []

    def request(self, msg, timeout):
        if not isinstance(msg, P.CheckRequest) or msg.transport != "cuda-ipc":
            return super().request(msg, timeout)
        self.sent.append(msg)
        cases = []
        for c in msg.cases:
            runs, after = [_exports(1, len(self.exported) + r) for r in range(c.repeats)], None
            self.exported += [t for r in runs for t in r]
            after = _exports(3, len(self.exported))
            self.exported += after
            cases.append(P.CaseTensors(runs=runs, inputs_after=after))
        return Reply("ok", P.Checked(cases=cases, transport="cuda-ipc", build=None, **{
            "aten": P.AtenReport(), "threads": P.ThreadCensus(base=3, after=3), **self.early}))


EARLY = {
    "returned": ({"returned": P.Returned(case=0, type="int")}, Status.REJECTED, "launch-returned"),
    "aten": ({"aten": P.AtenReport(seen=["aten.mm.default"], forbidden=[AtenCall(op="aten.mm.default", case=0,
                                                                                    library=False)])},
             Status.REJECTED, "aten"),
    "alias": ({"alias": ["case 0: output 0 shares memory with input 0"], "alias_case": 0}, Status.WRONG_SHAPE,
              "shares memory"),
    "thread": ({"threads": P.ThreadCensus(base=3, after=4)}, Status.REJECTED, "thread-left-behind"),
}


@pytest.mark.parametrize("path", list(EARLY))
def test_every_export_of_a_check_judged_before_any_copy_is_released(layernorm, tmp_path, hopper, opens, path):
    early, status, words = EARLY[path]
    worker = _EarlyVerdictWorker(early)
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s", static_rules=False)
    ev.transports.ipc = True
    out = ev.evaluate(Candidate(op="layernorm", template="custom", source=CANDIDATE), WL, tmp_path / "job")
    assert out.verdict.status is status and words in out.verdict.message, out.verdict
    assert worker.exported and sorted(opens.opened) == sorted(t.ipc[4] for t in worker.exported)


def test_exports_this_process_cannot_open_are_released_before_the_host_arena_retry(layernorm, tmp_path, hopper,
                                                                                   opens):
    worker = _EarlyVerdictWorker({})
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s", static_rules=False)
    ev.transports.ipc = True
    opens.refuse = True
    out = ev.evaluate(Candidate(op="layernorm", template="custom", source=CANDIDATE), WL, tmp_path / "job")
    assert [m.transport for m in worker.sent if isinstance(m, P.CheckRequest)] == ["cuda-ipc", "host-arena"]
    assert "stop here" in out.verdict.message and "could not open" in out.transport_note
    assert sorted(opens.lowered) == sorted(t.ipc[8] for t in worker.exported)   # every count lowered, none opened


@pytest.mark.parametrize("refuse", [False, True])
def test_timed_snapshots_not_copied_are_released(layernorm, tmp_path, hopper, opens, refuse):
    """A thread left behind in the timed calls: the snapshots are released, never copied; snapshots this process
    cannot open: released before the timing is asked again through the host arena."""
    from kernelloop.core.execute.shared import Arena
    shots = _exports(2)
    worker = _FakeBenchWorker(Arena(tmp_path / "timed.arena", [torch.arange(8, dtype=torch.float32)]))
    census = P.ThreadCensus(base=3, after=3 if refuse else 4)
    worker.request = lambda msg, timeout, inner=worker.request: (
        Reply("ok", P.Benched(samples={}, threads=census, transport="cuda-ipc",
                              snapshots=[P.Snapshot(call=k, seed=3, outputs=[t]) for k, t in enumerate(shots)]))
        if msg.transport == "cuda-ipc" else inner(msg, timeout))
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="s")
    ev.transports.ipc = True
    opens.refuse = refuse
    _, _, reply = ev.bench(None, WL, ["eager"], COLD_L2_EVENTS, tmp_path)
    released = opens.lowered if refuse else opens.opened
    assert sorted(released) == sorted(t.ipc[8] if refuse else t.ipc[4] for t in shots)
    if not refuse:
        assert ev.check_timed(WL, reply).message.startswith("thread-left-behind")

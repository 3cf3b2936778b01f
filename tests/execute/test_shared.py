"""How a worker's tensors reach the controller (core/execute/shared.py): a CUDA run hands the candidate tensors on its
device whatever the transport, the host arena where CUDA IPC is refused included, and says which transport ran.

No GPU is needed: a worker state of kind `cuda` whose tensors are CPU tensors of a subclass that says `is_cuda`
(as the build stage's stand-in does, core/build/aot_child.py) stands in for a GPU worker. The fake candidate refuses
host tensors as the Gluon templates do, so handing it an arena's pages -- what a CUDA run once did when CUDA IPC
was refused -- fails these tests."""

from pathlib import Path

import pytest
import torch

from kernelloop.core.bench.policy import COLD_L2_EVENTS
from kernelloop.core.execute import protocol as P
from kernelloop.core.execute import worker as W
from kernelloop.core.execute.shared import read_all, resolve_transport
from kernelloop.core.reference.guards import guard_breach, unguard
from kernelloop.base.records import BuildArtifact, Workload
from kernelloop.base.records.device import Device

WL = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp32")
CANDIDATE = '''
import torch

SEEN = []

def launch(x, weight, bias, y, *, eps, **config):
    SEEN.append([(type(t).__name__, t.is_cuda, t.data_ptr()) for t in (x, weight, bias, y)])
    if not x.is_cuda:   # as the Gluon templates do: they run on sm_90 GPUs only
        raise RuntimeError("the template runs on sm_90 GPUs only")
    y.copy_(torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps))
'''


class _OnDevice(torch.Tensor):
    """A CPU tensor that stands for one on the worker's GPU."""

    @property
    def is_cuda(self):
        return True


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "cuda:MIG-4c1d"])
@pytest.mark.parametrize("asked", ["arena", "cuda-ipc", "host-arena"])
def test_a_gpu_worker_never_places_the_candidates_tensors_in_a_host_arena(device, asked):
    got = resolve_transport(Device.of(device), asked)
    assert got != "arena"
    assert got == ("cuda-ipc" if asked == "cuda-ipc" else "host-arena")


@pytest.mark.parametrize("asked", ["arena", "cuda-ipc", "host-arena"])
def test_an_interpreter_worker_always_shares_its_arena(asked):
    assert resolve_transport(Device.of("interpret:1"), asked) == "arena"


@pytest.fixture
def gpu_worker(layernorm, tmp_path, monkeypatch):
    """A worker state of kind cuda, in this process, whose inputs and outputs are made 'on the device' (recorded)."""
    import kernelloop.core.reference.inputs as inputs
    made = []

    def on_device(make, at):   # `at`: the position of the device argument
        def wrapped(*args, **kw):
            assert args[at] == "cuda", args[at]   # the worker asks for its GPU's tensors
            out = [t.as_subclass(_OnDevice) for t in make(*args[:at], "cpu", *args[at + 1:], **kw)]
            made.extend(out)
            return out
        return wrapped
    monkeypatch.setattr(inputs, "make_inputs", on_device(inputs.make_inputs, 3))
    monkeypatch.setattr(inputs, "alloc_outputs", on_device(inputs.alloc_outputs, 2))
    guarded = inputs.alloc_guarded_outputs

    def guarded_on_device(spec, workload, device):   # the guarded backings (core/reference/guards.py) 'on the device'
        assert device == "cuda", device
        outs, backings = guarded(spec, workload, "cpu")
        outs, backings = [t.as_subclass(_OnDevice) for t in outs], [t.as_subclass(_OnDevice) for t in backings]
        made.extend(outs)
        return outs, backings
    monkeypatch.setattr(inputs, "alloc_guarded_outputs", guarded_on_device)
    monkeypatch.setattr(W, "_sync", lambda device: None)
    monkeypatch.setattr(W, "build_info", lambda mod, s, device: BuildArtifact(kernel_names=[], compile_s=s,
                                                                             toolchain="triton / sm_90"))
    monkeypatch.setattr(W, "cubin_hashes", lambda mod: [])
    state = W._State(Device.of("cuda"), tmp_path / "root", sandboxed=False)
    assert state.tensor_device == "cuda"
    state.job_root.mkdir()
    assert isinstance(W._load(state, P.LoadRequest(source=CANDIDATE, source_hash="c" * 16)), P.Loaded)
    return state, made, state.modules["c" * 16]


def _check(state, layernorm, job_dir: Path, transport: str):
    job_dir.mkdir()
    return W._check(state, P.CheckRequest(spec=layernorm.spec.model_dump_json(), source_hash="c" * 16,
                                          job_dir=str(job_dir), transport=transport,
                                          cases=[P.VerifyCase(workload=WL, seed=5, distribution="normal",
                                                              repeats=2)]))


@pytest.mark.parametrize("asked,refuse", [("arena", False), ("host-arena", False), ("cuda-ipc", True)])
def test_a_cuda_candidate_gets_the_tensors_made_on_its_device_and_the_host_arena_holds_its_outputs(
        gpu_worker, layernorm, tmp_path, monkeypatch, asked, refuse):
    state, made, mod = gpu_worker
    if refuse:   # the driver will not export: the worker falls back to the host arena and says why
        def refused(t):
            raise RuntimeError("CUDA IPC is not supported here")
        monkeypatch.setattr(W, "share_cuda", refused)
    reply = _check(state, layernorm, tmp_path / "job", asked)
    assert isinstance(reply, P.Checked), getattr(reply, "log", reply)
    # the candidate was called with the very tensors the worker made on its device, never an arena's host pages
    assert len(mod.SEEN) == 2
    ids = {t.data_ptr() for t in made}
    for call in mod.SEEN:
        assert all(kind == "_OnDevice" and on_gpu for kind, on_gpu, _ in call), call
        assert all(ptr in ids for _, _, ptr in call), call
    assert reply.transport == "host-arena" and reply.cases[0].inputs_before is None
    assert ("not supported here" in reply.transport_error) == refuse
    # the controller reads the candidate's outputs from the host arena, copied after the calls
    runs, after = read_all([[reply.cases[0].runs, reply.cases[0].inputs_after]])[0]
    runs = [[unguard(r[0], (WL.axes["M"], WL.axes["N"]), torch.float32)] for r in runs]   # the guarded backings
    assert all(guard_breach("y", b[0], WL.axes["M"] * WL.axes["N"] * 4) is None
               for b in read_all([reply.cases[0].runs])[0])
    x, w, b = made[:3]
    want = torch.nn.functional.layer_norm(x.as_subclass(torch.Tensor), (WL.axes["N"],), w.as_subclass(torch.Tensor),
                                          b.as_subclass(torch.Tensor), layernorm.spec.scalars["eps"])
    assert len(runs) == 2 and all(torch.equal(r[0], want) for r in runs)
    assert torch.equal(after[0], x.as_subclass(torch.Tensor))


def test_the_cuda_ipc_probe_is_answered_and_said_refused_without_a_gpu(gpu_worker):
    state, _, _ = gpu_worker
    state.tensor_device = "cpu"   # no CUDA here: the probe's tensor in CPU storage, which has no CUDA IPC handle
    got = W._share(state, P.ShareRequest(elements=8))
    # the worker says why instead of failing
    assert isinstance(got, P.Shared) and got.tensor is None and got.error
    assert isinstance(W._share(W._State(Device.of("interpret"), state.job_root, False), P.ShareRequest()), P.Shared)


def test_the_snapshots_of_a_gpu_worker_come_back_in_a_host_arena_where_ipc_is_refused(gpu_worker, tmp_path,
                                                                                      monkeypatch):
    from kernelloop.core.execute import timing
    state, _, _ = gpu_worker

    def refused(t):
        raise RuntimeError("CUDA IPC is not supported here")
    monkeypatch.setattr("kernelloop.core.execute.shared.share_cuda", refused)
    outs = [torch.full((4,), 2.0).as_subclass(_OnDevice)]
    msg = P.BenchRequest(spec="{}", workload=WL, policy=COLD_L2_EVENTS, subjects=["candidate"], seed=1,
                         job_dir=str(tmp_path), transport="cuda-ipc")
    shots, transport, why = timing._shared_snapshots(state, msg, [(5, {"seed": 9, "perturb": None}, outs)])
    assert transport == "host-arena" and "not supported" in why
    assert shots[0].call == 5 and torch.equal(read_all([shots[0].outputs])[0][0], torch.full((4,), 2.0))


@pytest.fixture
def exports_start_a_thread(monkeypatch):
    """CUDA IPC exports stand-in: the first one starts a thread (as a first export in a fresh process may), each
    returns a record of the tensor; the thread ends at teardown."""
    import threading
    from kernelloop.core.execute.shared import SharedTensor
    stop, started = threading.Event(), []

    def share(t):
        if not started:
            started.append(threading.Thread(target=stop.wait, name="export-helper", daemon=True))
            started[0].start()
        return SharedTensor(transport="cuda-ipc", dtype="float32", shape=list(t.shape), stride=list(t.stride()),
                            ipc=[list(t.shape), list(t.stride()), 0, 0, b"h", 4, 0, b"/r", 0, None, False])
    monkeypatch.setattr(W, "share_cuda", share)
    monkeypatch.setattr("kernelloop.core.execute.shared.share_cuda", share)
    yield started
    stop.set()
    for t in started:
        t.join(5)


def test_the_thread_census_is_taken_before_the_tensors_are_shared(gpu_worker, layernorm, tmp_path,
                                                                   exports_start_a_thread):
    state, _, _ = gpu_worker
    reply = _check(state, layernorm, tmp_path / "job", "cuda-ipc")
    assert isinstance(reply, P.Checked) and reply.transport == "cuda-ipc", getattr(reply, "log", reply)
    assert exports_start_a_thread and exports_start_a_thread[0].is_alive()   # sharing did start one
    assert reply.threads.after == reply.threads.base   # ... after the census: the honest kernel left none


def test_the_timed_calls_thread_census_is_taken_before_the_snapshots_are_shared(gpu_worker, layernorm, tmp_path,
                                                                                exports_start_a_thread, monkeypatch):
    from kernelloop.core.bench.policy import policies_for
    from kernelloop.core.execute import timing
    state, _, _ = gpu_worker
    monkeypatch.setattr(timing, "_sync", lambda device: None)
    policy = policies_for("interpret")[0].model_copy(update={"samples": 3, "warmup": 1})
    msg = P.BenchRequest(spec=layernorm.spec.model_dump_json(), workload=WL, policy=policy, subjects=["candidate"],
                         seed=1, source_hash="c" * 16, fresh_inputs=True, snapshots=1, job_dir=str(tmp_path),
                         transport="cuda-ipc")
    reply = timing.bench(state, msg)
    assert isinstance(reply, P.Benched) and reply.transport == "cuda-ipc", getattr(reply, "log", reply)
    assert reply.snapshots and exports_start_a_thread[0].is_alive()
    assert reply.threads.after == reply.threads.base and not reply.threads.new


def test_a_check_or_bench_of_a_candidate_this_worker_never_loaded_is_said_so(gpu_worker, layernorm, tmp_path):
    """A worker started after the load (the previous one replaced) answers with a protocol failure the controller
    acts on (it loads again), not a KeyError reported as the candidate's runtime error."""
    from kernelloop.core.bench.policy import COLD_L2_EVENTS
    from kernelloop.core.execute import timing
    state, _, _ = gpu_worker
    (tmp_path / "job").mkdir()
    check = P.CheckRequest(spec=layernorm.spec.model_dump_json(), source_hash="d" * 16, job_dir=str(tmp_path / "job"),
                           cases=[P.VerifyCase(workload=WL, seed=5, distribution="normal")])
    bench = P.BenchRequest(spec=layernorm.spec.model_dump_json(), workload=WL, policy=COLD_L2_EVENTS,
                           subjects=["candidate", "eager"], seed=1, source_hash="d" * 16)
    for reply in (W._check(state, check), timing.bench(state, bench)):
        assert P.is_not_loaded(reply), reply


def test_device_memory_running_out_replaces_the_worker(gpu_worker, layernorm, tmp_path):
    state, _, _ = gpu_worker
    oom = "def launch(x, weight, bias, y, *, eps, **config):\n" \
          "    raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')\n"
    assert isinstance(W._load(state, P.LoadRequest(source=oom, source_hash="e" * 16)), P.Loaded)
    (tmp_path / "job").mkdir()
    reply = W._check(state, P.CheckRequest(spec=layernorm.spec.model_dump_json(), source_hash="e" * 16,
                                           job_dir=str(tmp_path / "job"),
                                           cases=[P.VerifyCase(workload=WL, seed=5, distribution="normal")]))
    assert isinstance(reply, P.Failed) and reply.stage == "runtime" and reply.cuda_fault   # pool.Worker replaces it

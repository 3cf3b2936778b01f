"""The worker process: imports candidate code, runs it on seeded inputs, times it. Never decides a verdict.

This module is the request loop and the `load` and `check` handlers; the records of the protocol are
core/execute/protocol.py (requests `load`, `check`, `bench`, `exit`; replies Ready, Loaded, Checked, Benched, Failed
with its `stage` and `log`), the `bench` handler is core/execute/timing.py with the baselines of core/execute/baselines.py,
what a first call compiled is read by core/execute/build.py and the thread census is core/sandbox/census.py. Outputs travel
back as shared memory (core/execute/shared.py) that the controller reads; it compares them with a reference this process
never sees.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from ...base.records.device import Device
from . import protocol as P
from .aten import AtenRecorder
from .baselines import BUILTIN_BASELINES, make_baseline  # noqa: F401 - where callers long imported them from
from .build import build_info, cubin_hashes, forget_compiled, is_compile_error
from ..sandbox.census import thread_count
from .procutil import CUDA_FAULT_MARKERS, _import_file, _sync, mark_stage
from .shared import Arena, resolve_transport, share_cuda
from .timing import CANDIDATE_KINDS, _rotating_call, _scratch_of, bench  # noqa: F401

class _State:
    def __init__(self, device: Device, job_root: Path, sandboxed: bool = True):
        self.device = device
        self.sandboxed = sandboxed
        self.sandbox = None   # sandbox.policy.Sandbox once armed (just before the first candidate import)
        self.tensor_device = device.tensor_device
        self.job_root = job_root
        self.modules: dict[str, object] = {}
        self.refs: dict[str, object] = {}
        self.compiled: dict[str, object] = {}
        self.specs = P.SpecCache()   # validated OpSpecs by the hash of their JSON text
        self.shared: list = []       # what the last reply shares with the controller (core/execute/shared.py)


def _load(state: _State, msg: P.LoadRequest) -> P.Loaded | P.Failed:
    key = msg.source_hash
    if key in state.modules:
        return P.Loaded()
    mark_stage(state.job_root, "import")
    path = state.job_root / f"cand_{key[:16]}.py"
    path.write_text(msg.source)
    if state.sandboxed and state.sandbox is None:
        from ..sandbox.policy import DENIAL_FILE, default_policy, install
        state.sandbox = install(default_policy([state.job_root], state.job_root / DENIAL_FILE))
    aten = AtenRecorder()   # what the import itself computes with torch (core/execute/aten.py; case -1: the import)
    try:
        with aten.case(-1):
            mod = _import_file(path, f"kernelloop_candidate_{key[:16]}")
    except BaseException as e:  # noqa: BLE001 - candidate code may raise anything, even SystemExit
        return P.Failed(stage="import", log=traceback.format_exc()[-20000:], error=repr(e)[:500])
    if not callable(getattr(mod, "launch", None)):
        return P.Failed(stage="import", log="the candidate defines no callable `launch`", error="no launch")
    state.modules[key] = mod
    return P.Loaded(aten=aten.report())


def _alias_problems(outputs, before: list, inputs, scratch=None) -> list[str]:
    """Outputs must still be the buffers the harness allocated, and must not share memory with inputs (nor with the
    workspace: an output viewed into the scratch tensor would be poisoned under the kernel before a timed call)."""
    problems = []
    if scratch is not None:
        inputs = [*inputs, scratch]
    for k, (o, (ptr, shape, stride)) in enumerate(zip(outputs, before)):
        if o.data_ptr() != ptr or tuple(o.shape) != shape or o.stride() != stride:
            problems.append(f"output {k} was replaced or re-strided (set_/resize_/as_strided)")
        lo, hi = o.data_ptr(), o.data_ptr() + o.numel() * o.element_size()
        for j, x in enumerate(inputs):
            xlo, xhi = x.data_ptr(), x.data_ptr() + x.numel() * x.element_size()
            if lo < xhi and xlo < hi:
                problems.append(f"output {k} shares memory with " + ("the scratch workspace" if x is scratch
                                                                      else f"input {j}"))
    return problems


class _Calls:
    """What the calls of one check request found so far: the build (after the first call), the thread count then,
    aliasing problems and the first case with one, the first returned value."""

    def __init__(self) -> None:
        self.build, self.threads_base, self.returned = None, None, None
        self.alias: list[str] = []
        self.alias_case: int | None = None


def _check(state: _State, msg: P.CheckRequest) -> P.Checked | P.Failed:
    """Run the candidate on each verification case. Its inputs and outputs live where the controller can read them
    (core/execute/shared.py): on the CPU in the case's arena, which the candidate writes into directly and which this
    process unmaps once the case's calls have returned (a later case's stray write cannot reach it); on a GPU they are
    CUDA tensors on the worker's GPU, shared after the calls by CUDA IPC or copied into a host arena. Nothing is
    copied to files of serialised tensors."""
    spec = state.specs.get(msg.spec)
    mod = state.modules.get(msg.source_hash)
    if mod is None:   # a worker started since the load (the previous one was replaced): the controller loads again
        return P.not_loaded(msg.source_hash)
    forget_compiled(mod)  # so the build record describes exactly the kernels this trial compiles
    if state.sandbox is not None:
        state.sandbox.grant_write(msg.job_dir)
    state.shared = []     # the previous request's shared memory: the controller has its copies
    transport = resolve_transport(state.device, msg.transport)
    calls, shared = _Calls(), []
    aten = AtenRecorder()   # the ATen operations of every verification call (core/execute/aten.py)
    for k, case in enumerate(msg.cases):
        failed = _run_case(state, mod, spec, msg, k, case, transport, calls, aten, shared)
        if failed is not None:
            return failed
        if transport == "arena":   # its records are in `shared`; no later call may reach its pages
            state.shared.pop().close()
    # the census right after the calls, before sharing: a first CUDA IPC export may start a thread of torch's own
    threads = P.ThreadCensus(base=calls.threads_base, after=thread_count())
    cases, transport, why = (shared, transport, "") if transport == "arena" else \
        _shared_cases(state, msg.job_dir, shared, transport)
    return P.Checked(cases=cases, transport=transport, transport_error=why, build=calls.build, alias=calls.alias,
                     alias_case=calls.alias_case, returned=calls.returned, threads=threads,
                     aten=aten.report(), cubins=cubin_hashes(mod) if state.device.is_cuda else [])


def _run_case(state: _State, mod, spec, msg: P.CheckRequest, k: int, case: P.VerifyCase, transport: str,
              calls: _Calls, aten: AtenRecorder, shared: list) -> P.Failed | None:
    """Every call of case `k` on fresh inputs and outputs; appends what the controller is to read (on the CPU the
    case's CaseTensors, its arena last in `state.shared`; on a GPU the tensors, shared after every case) to `shared`.
    Returns the failure of a call that raised."""
    from ..reference.inputs import make_inputs
    mark_stage(state.job_root, f"verify case {k}" if calls.build is not None else f"build (first call, case {k})")
    w = case.workload
    inputs = make_inputs(spec, w, case.seed, state.tensor_device, case.distribution, case.pattern)
    # What the candidate is given, before its first call: the controller compares it with its regeneration
    # (on CPU tensors only, where a rare one-ulp drift between the processes' draws was seen; CUDA inputs come
    # from the device's Philox generator, and copying them would double the case's host traffic).
    seen = [i.detach().clone() for i in inputs] if state.tensor_device == "cpu" else None
    # every call's outputs and workspace fresh, poisoned and inside guarded backings (core/reference/guards.py)
    bufs = _Buffers(spec, w, state.tensor_device, case.repeats)
    if transport == "arena":   # the CPU only: every tensor of the case in its arena, written there directly
        arena = Arena(Path(msg.job_dir) / f"case{k}.arena", [*inputs, *(seen or []), *bufs.backings()])
        state.shared.append(arena)
        views, n = arena.views, len(inputs)
        inputs, seen = views[:n], (views[n:2 * n] if seen is not None else None)
        bufs.rebind(views[n * (2 if seen is not None else 1):])
    for outputs, scratch in zip(bufs.outputs, bufs.scratch):
        before = [(o.data_ptr(), tuple(o.shape), o.stride()) for o in outputs]
        t0 = time.perf_counter()
        try:
            with aten.case(k):
                ret = mod.launch(*inputs, *outputs, **scratch, **spec.scalars, **msg.config)
            _sync(state.device)
        except BaseException as e:  # noqa: BLE001
            text = traceback.format_exc()[-20000:]
            stage = "compile" if calls.build is None and is_compile_error(e) else "runtime"
            return P.Failed(stage=stage, log=text, error=f"{type(e).__name__}: {e}"[:2000],
                            cuda_fault=any(m in text for m in CUDA_FAULT_MARKERS), build=calls.build, case=k)
        if calls.build is None:
            calls.build = build_info(mod, time.perf_counter() - t0, state.device)
            mark_stage(state.job_root, f"verify case {k}")
            calls.threads_base = thread_count()  # after the first call: lazily started runtime pools exist
        if ret is not None and calls.returned is None:   # the contract: results go into the given outputs
            calls.returned = P.Returned(case=k, type=type(ret).__name__)
        problems = _alias_problems(outputs, before, inputs, scratch.get("scratch"))
        if problems and calls.alias_case is None:
            calls.alias_case = k
        calls.alias += [f"case {k}: {p}" for p in problems]
    if transport == "arena":
        shared.append(_case_tensors(arena.records, len(inputs), seen is not None, bufs))
    else:
        shared.append((k, bufs, seen, inputs))
    return None


def _case_tensors(records: list, n: int, with_seen: bool, bufs: "_Buffers") -> P.CaseTensors:
    """A case's arena records (laid out as inputs, the copy taken before the calls if any, then `bufs.backings()`)
    as the controller reads them."""
    at, m, r = n * (2 if with_seen else 1), len(bufs.spec.outputs), len(bufs.out_backings)
    return P.CaseTensors(runs=[records[at + i * m:at + (i + 1) * m] for i in range(r)], scratch=records[at + r * m:],
                         inputs_before=records[n:2 * n] if with_seen else None, inputs_after=records[:n])


class _Buffers:
    """One case's output buffers and workspaces, one set per call, each inside a guarded backing (the backings are
    what the controller reads: the buffers and the guard zones around them)."""

    def __init__(self, spec, w, device: str, repeats: int):
        from ..reference.inputs import alloc_guarded_outputs, alloc_guarded_scratch
        self.spec, self.w = spec, w
        runs = [alloc_guarded_outputs(spec, w, device) for _ in range(repeats)]
        scratch = [alloc_guarded_scratch(spec, w, device) for _ in range(repeats)]
        self.outputs = [o for o, _ in runs]
        self.out_backings = [b for _, b in runs]
        self.scratch = [kw for kw, _ in scratch]
        self.scratch_backings = [b for _, b in scratch if b is not None]

    def backings(self) -> list:
        return [*(b for r in self.out_backings for b in r), *self.scratch_backings]

    def rebind(self, views: list) -> None:
        """Use `views` (the backings' copies, in `backings()` order: an arena's) from now on."""
        from ..reference.guards import unguard
        m = len(self.spec.outputs)
        self.out_backings = [views[r * m:(r + 1) * m] for r in range(len(self.outputs))]
        self.outputs = [[unguard(b, tuple(o.shape), o.dtype) for b, o in zip(bs, outs)]
                        for bs, outs in zip(self.out_backings, self.outputs)]
        self.scratch_backings = views[m * len(self.outputs):]
        self.scratch = [{"scratch": unguard(b, tuple(kw["scratch"].shape), kw["scratch"].dtype)}
                        for b, kw in zip(self.scratch_backings, self.scratch)] or self.scratch


def _shared_cases(state: _State, job_dir: str, cases: list, transport: str
                  ) -> tuple[list[P.CaseTensors], str, str]:
    """A GPU's cases' tensors as the controller finds them, the transport that ran and why CUDA IPC did not: CUDA IPC
    handles of the worker's buffers (kept alive until the next request), or, where CUDA IPC was not asked for or the
    driver refuses to export, those buffers copied into a host arena now that every call has returned. Outputs and
    workspaces are shared as their guarded backings (core/reference/guards.py). (The CPU's arena records are taken
    case by case, core/execute/worker.py `_run_case`.)"""
    why = ""
    if transport == "cuda-ipc":
        try:
            out = [P.CaseTensors(runs=[[share_cuda(o) for o in r] for r in b.out_backings],
                                 scratch=[share_cuda(s) for s in b.scratch_backings],
                                 inputs_after=[share_cuda(i) for i in inputs]) for _, b, _, inputs in cases]
            state.shared = [t for _, b, _, inputs in cases for t in (*inputs, *b.backings())]
            return out, transport, ""
        except Exception as e:  # noqa: BLE001 - no IPC here: the host arena, and the reply says why
            why = f"{type(e).__name__}: {e}"[:500]
    state.shared = []
    out = []
    for k, b, _, inputs in cases:
        arena = Arena(Path(job_dir) / f"case{k}.arena", [*inputs, *b.backings()])   # device -> host
        state.shared.append(arena)
        out.append(_case_tensors(arena.records, len(inputs), False, b))
    return out, "host-arena", why


def _share(state: _State, msg: P.ShareRequest) -> P.Shared | P.Failed:
    """The CUDA IPC probe: a tensor of known contents on the worker's GPU, shared by handle (kept until the next
    request)."""
    import torch
    state.shared = []
    if not state.device.is_cuda:
        return P.Shared(error="not a GPU worker: nothing is shared by CUDA IPC")
    t = torch.arange(msg.elements, dtype=torch.float32, device=state.tensor_device)
    _sync(state.device)
    try:
        record = share_cuda(t)
    except Exception as e:  # noqa: BLE001 - the driver or torch refuses: said, not fatal
        return P.Shared(error=f"{type(e).__name__}: {e}"[:500])
    state.shared = [t]
    return P.Shared(tensor=record)


HANDLERS = {"load": _load, "check": _check, "bench": bench, "share": _share}   # by the request's `op`


def _warm_runtime(torch) -> None:
    """Start torch's lazily created thread pools now, so the thread census around candidate calls is exact."""
    import io
    x = torch.randn(1 << 20)
    (x * 2).sum().item()
    torch.save(x[:16], io.BytesIO())


def worker_main(conn, device: str, log_path: str, job_root: str, view: str = "") -> None:
    """Entry point of a spawned worker; `device`: a records.Device's text (a GPU worker sees only its own GPU, which
    the controller chose through CUDA_VISIBLE_DEVICES); `view`: what sandbox.confine did (reported in the ready
    message)."""
    device = Device.of(device)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # The worker decides the execution mode itself: an inherited TRITON_INTERPRET=1 would silently run
    # "cuda" jobs in the interpreter.
    if device.is_cuda:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch  # import before the first job so job timeouts do not include it
    import triton
    from ..sandbox.policy import SANDBOX_ENV
    state = _State(device, Path(job_root), sandboxed=os.environ.pop(SANDBOX_ENV, "on") != "off")
    if device.is_cuda:
        torch.cuda.init()
    # Runtime scratch of kernels that ask for it (device-side TMA descriptors, `tl.make_tensor_descriptor`):
    # the harness owns it, since candidates may not allocate, and zero-fills it, so it never holds old outputs.
    scratch_device = device.tensor_device
    triton.set_allocator(lambda size, alignment, stream: torch.zeros(size, dtype=torch.int8, device=scratch_device))
    _warm_runtime(torch)
    if view:
        print(f"kernelloop worker: {view}", flush=True)
    P.send(conn, P.Ready(pid=os.getpid(), view=view))
    while True:
        try:
            data = P.receive(conn, P.MAX_REQUEST_BYTES)
        except (EOFError, OSError, P.ProtocolViolation):
            return  # the controller is gone (or sent what it never sends)
        try:
            msg = P.decode_request(data)
        except Exception:  # noqa: BLE001 - a malformed request is answered, not fatal
            msg = None
        if isinstance(msg, P.ExitRequest):
            # Every reply has been sent and nothing else of the worker is kept: it ends at once, as a killed worker
            # does, rather than spending most of a second tearing torch down while the controller waits for it.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        if not _answer(state, conn, msg, data):
            return


def _answer(state: _State, conn, msg, data: bytes) -> bool:
    """Handle one request and send its reply (JSON bytes, its `seq` the request's); False once the controller is
    gone."""
    try:
        if msg is None:
            reply = P.Failed(stage="protocol", log=f"bad request {data[:2000]!r}", error="bad request")
        elif isinstance(msg, P.SyncRequest):
            reply = P.Synced()
        else:
            reply = HANDLERS[msg.op](state, msg)
    except BaseException:  # noqa: BLE001 - report, never die silently
        text = traceback.format_exc()[-20000:]
        reply = P.Failed(stage="runtime", log=text, error=text.splitlines()[-1][:2000],
                         cuda_fault=any(m in text for m in CUDA_FAULT_MARKERS))
    update = {"seq": msg.seq if msg is not None else 0}
    if state.sandbox is not None:
        denied = state.sandbox.take_denials()
        if denied:
            update["denied"] = denied
    reply = reply.model_copy(update=update)
    sys.stdout.flush()
    try:
        data = P.encode(reply)
    except ValueError as e:   # a reply past the protocol's limit: said, in a reply that fits
        data = P.encode(P.Failed(stage="protocol", error=str(e)[:2000], seq=update["seq"],
                                 denied=update.get("denied", [])))
    try:
        conn.send_bytes(data)
    except (BrokenPipeError, OSError):
        return False
    return True

"""The worker process: imports candidate code, runs it on seeded inputs, times it. Never decides a verdict.

Protocol (dict messages over a multiprocessing pipe): `load`, `check`, `bench`, `exit`. Every reply has
`ok`; failures carry `stage` (import/compile/runtime) and `log`. Outputs travel back as files that the
controller reads; the controller compares them with a reference this process never sees.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

CUDA_FAULT_MARKERS = ("illegal memory access", "unspecified launch failure", "CUDA error", "cudaError",
                      "misaligned address", "device-side assert", "an illegal instruction")


def _import_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _build_info(module, compile_s: float, device: str) -> dict:
    """Registers, spills and shared memory of every kernel the module's JIT functions compiled."""
    import hashlib

    import triton
    from triton.runtime.jit import JITFunction
    info = {"kernel_names": [], "registers": None, "spills": None, "shared_bytes": None, "warps": None,
            "compile_s": compile_s, "toolchain": f"triton {triton.__version__}", "binary_hash": None}
    if device != "cuda":
        info["toolchain"] += " / interpreter"
        info["kernel_names"] = [n for n, v in vars(module).items() if isinstance(v, JITFunction)]
        return info
    import torch
    cap = torch.cuda.get_device_capability()
    info["toolchain"] += f" / sm_{cap[0]}{cap[1]}"
    digest = hashlib.sha256()
    for name, fn in vars(module).items():
        if not isinstance(fn, JITFunction):
            continue
        for entry in getattr(fn, "device_caches", {}).values():
            cache = next((c for c in entry if isinstance(c, dict)), {})
            for kernel in cache.values():
                info["kernel_names"].append(kernel.metadata.name if hasattr(kernel.metadata, "name") else name)
                regs, spills = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
                shared = getattr(kernel.metadata, "shared", None)
                warps = getattr(kernel.metadata, "num_warps", None)   # after warp specialization, all of them
                if warps is not None:
                    info["warps"] = max(info["warps"] or 0, int(warps))
                if regs is not None:
                    info["registers"] = max(info["registers"] or 0, int(regs))
                if spills is not None:
                    info["spills"] = max(info["spills"] or 0, int(spills))
                if shared is not None:
                    info["shared_bytes"] = max(info["shared_bytes"] or 0, int(shared))
                cubin = kernel.asm.get("cubin") if hasattr(kernel, "asm") else None
                if cubin:
                    digest.update(cubin if isinstance(cubin, bytes) else str(cubin).encode())
    info["binary_hash"] = digest.hexdigest() if info["kernel_names"] else None
    return info


def _forget_compiled(module) -> None:
    """Drop the in-memory kernel caches of the module's JIT functions.

    Template candidates share one module (same source, different configs); without this, the build record of a
    trial would mix in the kernels of earlier trials. Recompiling after the drop usually hits Triton's on-disk
    cache, so the recorded compile time is the time of this trial's first call, not necessarily a cold compile.
    """
    from triton.runtime.jit import JITFunction
    for fn in vars(module).values():
        caches = getattr(fn, "device_caches", None) if isinstance(fn, JITFunction) else None
        if caches is not None:
            caches.clear()


def _is_compile_error(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "TritonError"}) and \
        "OutOfResources" not in names


class _State:
    def __init__(self, device: str, job_root: Path):
        self.device = device
        self.tensor_device = "cuda" if device == "cuda" else "cpu"
        self.job_root = job_root
        self.modules: dict[str, object] = {}
        self.refs: dict[str, object] = {}
        self.compiled: dict[str, object] = {}


def _load(state: _State, msg: dict) -> dict:
    key = msg["source_hash"]
    if key in state.modules:
        return {"ok": True}
    path = state.job_root / f"cand_{key[:16]}.py"
    path.write_text(msg["source"])
    try:
        mod = _import_file(path, f"kernelloop_candidate_{key[:16]}")
    except BaseException as e:  # noqa: BLE001 - candidate code may raise anything, even SystemExit
        return {"ok": False, "stage": "import", "log": traceback.format_exc()[-20000:], "error": repr(e)[:500]}
    if not callable(getattr(mod, "launch", None)):
        return {"ok": False, "stage": "import", "log": "the candidate defines no callable `launch`",
                "error": "no launch"}
    state.modules[key] = mod
    return {"ok": True}


def _reference(state: _State, path: str):
    """The op's plain-PyTorch reference (eager and torch.compile baselines), imported once per file."""
    if path not in state.refs:
        state.refs[path] = _import_file(Path(path), f"kernelloop_worker_ref_{len(state.refs)}").reference
    return state.refs[path]


def _sync(device: str) -> None:
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def _thread_count() -> int:
    """OS threads of this process (native threads included), or Python threads where /proc is absent."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading
        return threading.active_count()


def _thread_names() -> dict[str, str]:
    """tid -> thread name (/proc/self/task/<tid>/comm) of every OS thread of this process; {} where /proc is absent."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                out[tid] = f.read().strip()
        except OSError:  # the thread ended between the listing and the read
            continue
    return out


def _new_threads(before: dict[str, str]) -> list[dict]:
    """Threads that did not exist in `before`: name, and for Python threads the files of their innermost frames
    (a thread started from the candidate's module shows that module's path; a runtime pool shows its library)."""
    import sys
    import threading
    by_ident = {t.native_id: t for t in threading.enumerate() if getattr(t, "native_id", None) is not None}
    frames = sys._current_frames()
    out = []
    for tid, name in sorted(_thread_names().items()):
        if tid in before:
            continue
        entry = {"tid": int(tid), "name": name, "python": False}
        t = by_ident.get(int(tid))
        if t is not None:
            entry.update(python=True, python_name=t.name)
            f, files = frames.get(t.ident), []
            while f is not None and len(files) < 8:
                files.append(f.f_code.co_filename)
                f = f.f_back
            entry["files"] = files
        out.append(entry)
    return out


def _settled_thread_count(poll_s: float = 0.2, stable_polls: int = 3, limit_s: float = 5.0) -> int:
    """The thread count once it has not changed for `stable_polls` consecutive polls (or after `limit_s`)."""
    import time
    last, same, deadline = _thread_count(), 0, time.monotonic() + limit_s
    while same < stable_polls and time.monotonic() < deadline:
        time.sleep(poll_s)
        now = _thread_count()
        same = same + 1 if now == last else 0
        last = now
    return last


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


def _check(state: _State, msg: dict) -> dict:
    """Run the candidate on each verification case; save outputs (all repeats) and inputs for the controller."""
    import torch

    from ..records import OpSpec, Workload
    from ..reference.inputs import alloc_outputs, alloc_scratch, make_inputs
    spec = OpSpec.model_validate_json(msg["spec"])
    mod = state.modules[msg["source_hash"]]
    _forget_compiled(mod)  # so the build record describes exactly the kernels this trial compiles
    files, build, threads_base, alias, alias_case = [], None, None, [], None
    for k, case in enumerate(msg["cases"]):
        w = Workload.model_validate_json(case["workload"])
        inputs = make_inputs(spec, w, case["seed"], state.tensor_device, case["distribution"])
        # What the candidate is given, before its first call: the controller compares it with its regeneration
        # (on CPU tensors only, where a rare one-ulp drift between the processes' draws was seen; CUDA inputs come
        # from the device's Philox generator, and copying them would double the case's host traffic).
        seen = [i.detach().clone() for i in inputs] if state.tensor_device == "cpu" else None
        runs = []
        for _ in range(case.get("repeats", 1)):
            outputs = alloc_outputs(spec, w, state.tensor_device)
            scratch = alloc_scratch(spec, w, state.tensor_device)   # fresh and poisoned for every call
            before = [(o.data_ptr(), tuple(o.shape), o.stride()) for o in outputs]
            t0 = time.perf_counter()
            try:
                mod.launch(*inputs, *outputs, **scratch, **spec.scalars, **msg["config"])
                _sync(state.device)
            except BaseException as e:  # noqa: BLE001
                text = traceback.format_exc()[-20000:]
                stage = "compile" if build is None and _is_compile_error(e) else "runtime"
                return {"ok": False, "stage": stage, "log": text, "error": f"{type(e).__name__}: {e}"[:2000],
                        "cuda_fault": any(m in text for m in CUDA_FAULT_MARKERS), "build": build, "case": k}
            if build is None:
                build = _build_info(mod, time.perf_counter() - t0, state.device)
                threads_base = _thread_count()  # after the first call: lazily started runtime pools exist
            problems = _alias_problems(outputs, before, inputs, scratch.get("scratch"))
            if problems and alias_case is None:
                alias_case = k
            alias += [f"case {k}: {p}" for p in problems]
            runs.append([o.detach().cpu() for o in outputs])
        path = Path(msg["job_dir"]) / f"check{k}.pt"
        torch.save({"runs": runs, **({"inputs_before": seen} if seen is not None else {}),
                    "inputs_after": [i.detach().cpu() for i in inputs]}, path)
        files.append(str(path))
    return {"ok": True, "files": files, "build": build, "alias": alias, "alias_case": alias_case,
            "threads": {"base": threads_base, "after": _thread_count()}}


BUILTIN_BASELINES = ("eager", "torch.compile", "copy", "copy-kernel")
"""Baselines every op has: its reference on op-dtype inputs, that reference under torch.compile, and a device copy
of the op's minimum bytes. Other names come from the op's `baselines.py` (its BASELINES table)."""


def make_baseline(name: str, inputs: list, scalars: dict, *, reference_file: str | None = None,
                  baselines_file: str | None = None, bytes_moved: float = 0.0, device: str = "cpu",
                  load_reference: Callable[[str], Callable] | None = None, compiled: dict | None = None,
                  compile_key: str = "") -> Callable[[], object]:
    """A zero-argument callable running baseline `name` on `inputs`: what the worker times, and what the
    profiling harness (`kernelloop.profile.harness`, baseline mode) runs under Nsight Compute.

    `eager` calls the op's reference, `torch.compile` the compiled reference (compiled and called once here, so a
    failure raises now), `copy` copies half of `bytes_moved` bytes on the device (the same bytes read + written),
    `copy-kernel` moves them through an elementwise kernel (what Nsight Compute can profile), any other name is a factory of the op's `baselines.py` BASELINES table (called once here). Raises when the
    baseline is unavailable (no reference file, no baselines.py, library missing, unknown name).
    """
    import torch
    load = load_reference or (lambda path: _import_file(Path(path), "kernelloop_baseline_ref").reference)
    if name == "eager":
        if not reference_file:
            raise ValueError("no reference file given for the eager baseline")
        ref = load(reference_file)
        return lambda: ref(*inputs, **scalars)
    if name == "torch.compile":
        if not reference_file:
            raise ValueError("no reference file given for the torch.compile baseline")
        ref = load(reference_file)
        cache = compiled if compiled is not None else {}
        key = compile_key or reference_file
        if key not in cache:
            cache[key] = torch.compile(ref, dynamic=False)
        fn = cache[key]
        fn(*inputs, **scalars)  # compile now so a failure is a note, not a crash mid-sampling
        return lambda: fn(*inputs, **scalars)
    if name == "copy":
        nbytes = int(bytes_moved // 2)
        src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(0, 255)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)
    if name == "copy-kernel":
        # The same bytes through an elementwise kernel: a device-to-device copy_ is a cudaMemcpy, which Nsight
        # Compute does not profile as a kernel, so a copy roof measured by ncu needs a kernel that copies.
        n = max(1, int(bytes_moved // 2) // 4)
        src = torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32, device=device)
        dst = torch.empty_like(src)
        return lambda: torch.bitwise_and(src, -1, out=dst)
    base_file = Path(baselines_file) if baselines_file else None
    if base_file is None or not base_file.is_file():
        raise ImportError("the op has no baselines.py")
    factory = _import_file(base_file, "kernelloop_worker_baselines").BASELINES[name]
    fn = factory()
    fn(*inputs, **scalars)
    return lambda: fn(*inputs, **scalars)


CANDIDATE_KINDS = ("candidate", "candidate-twin", "candidate-same")


def _rotating_call(mod, cfg: dict, inputs: list, scalars: dict, live: dict, spec, w, dev, sets: int, *, start: int,
                   is_candidate: bool):
    """A call of the candidate's kernel that writes the next of `sets` shared output sets each time.

    Every candidate-kind subject cycles through the same sets from its own starting offset, so no subject is
    tied to one placement of its outputs in memory (on the H200 a ~7 µs kernel timed > 2 % faster than its A/A
    twin with its own output buffers in 39 of 40 comparisons). The candidate's latest set is `live["outputs"]`:
    the snapshot of a timed call reads the buffers that call wrote.
    """
    from ..reference.inputs import alloc_outputs
    pool = live.get("pool")
    if pool is None:
        pool = live["pool"] = [alloc_outputs(spec, w, dev) for _ in range(sets)]
    if "scratch_pool" not in live:
        # the workspaces rotate with the output sets (where a kernel's writes land in memory is spread the same way)
        live["scratch_pool"] = [_scratch_of(spec, w, dev, live) for _ in range(sets)]
    scratches = live["scratch_pool"]
    turn = {"i": start}
    if is_candidate:
        live["outputs"] = pool[start % sets]

    def call():
        k = turn["i"] % sets
        turn["i"] += 1
        if is_candidate:
            live["outputs"] = pool[k]
        return mod.launch(*inputs, *pool[k], **scratches[k], **scalars, **cfg)
    return call


def _scratch_of(spec, w, dev, live: dict) -> dict:
    """A workspace of the subject's own (the `scratch=` keyword, or {}), listed in live["scratch"] so that the timer's
    hook poisons it before every sample."""
    from ..reference.inputs import alloc_scratch
    kw = alloc_scratch(spec, w, dev)
    if kw:
        live.setdefault("scratch", []).append(kw["scratch"])
    return kw


def _subjects(state: _State, msg: dict) -> tuple[dict, dict, dict]:
    """Callables for each subject requested; notes say why a requested baseline is unavailable."""
    from ..records import OpSpec, TimingPolicy, Workload
    from ..reference.inputs import alloc_outputs, make_inputs
    sets = TimingPolicy.model_validate_json(msg["policy"]).output_sets if msg.get("policy") else 1
    spec = OpSpec.model_validate_json(msg["spec"])
    w = Workload.model_validate_json(msg["workload"])
    dev = state.tensor_device
    inputs = make_inputs(spec, w, msg["seed"], dev)
    scalars = spec.scalars
    subjects, notes = {}, {}
    live = {"inputs": inputs}
    for name in msg["subjects"]:
        try:
            if name in CANDIDATE_KINDS:
                # A/A experiments: the twin is the same kernel with its own output buffers; "candidate-same" is the
                # same kernel writing the candidate's very buffers (only the subject's name differs)
                mod = state.modules[msg["source_hash"]]
                cfg = msg["config"]
                if sets > 1:
                    subjects[name] = _rotating_call(mod, cfg, inputs, scalars, live, spec, w, dev, sets,
                                                    start=sum(n in CANDIDATE_KINDS for n in subjects),
                                                    is_candidate=name == "candidate")
                    continue
                if name == "candidate-twin":
                    outputs = alloc_outputs(spec, w, dev)
                else:
                    outputs = live.get("outputs") or alloc_outputs(spec, w, dev)
                    live["outputs"] = outputs
                scratch = _scratch_of(spec, w, dev, live)
                subjects[name] = lambda mod=mod, outputs=outputs, cfg=cfg, scratch=scratch: \
                    mod.launch(*inputs, *outputs, **scratch, **scalars, **cfg)
            else:
                ref_file = msg.get("reference_file")
                subjects[name] = make_baseline(
                    name, inputs, scalars, reference_file=ref_file, baselines_file=msg.get("baselines_file"),
                    bytes_moved=msg.get("bytes_moved", 0.0), device=dev,
                    load_reference=lambda path: _reference(state, path), compiled=state.compiled,
                    compile_key=(ref_file or "") + w.id)
        except BaseException as e:  # noqa: BLE001 - a missing optional baseline is a note
            notes[name] = f"unavailable: {type(e).__name__}: {e}"[:500]
    return subjects, notes, live


def _bench(state: _State, msg: dict) -> dict:
    import torch

    from ..bench.timer import gpu_snapshot, sample
    from ..records import OpSpec, TimingPolicy, Workload
    from ..reference.inputs import make_inputs, poison_
    policy = TimingPolicy.model_validate_json(msg["policy"])
    subjects, notes, live = _subjects(state, msg)
    spec = OpSpec.model_validate_json(msg["spec"])
    w = Workload.model_validate_json(msg["workload"])
    refresh_seeds = msg.get("refresh_seeds") or []
    snapshot_at = set(msg.get("snapshot_calls") or [])
    counters = {"refresh": 0, "candidate_calls": 0}
    snapshots = []

    def poison_scratch(name: str | None = None) -> None:
        # The workspaces poisoned again before every call (outside the timed interval): nothing a call leaves
        # there, such as a copy of its answer and a fingerprint of its inputs, survives to the next call.
        for t in live.get("scratch", ()):
            poison_(t)

    def before(name: str) -> None:
        poison_scratch(name)
        # New input values behind the same pointers before every timed call: caches keyed by pointer, id or
        # content return stale answers, which the snapshot checks below expose.
        if refresh_seeds:
            seed = refresh_seeds[counters["refresh"] % len(refresh_seeds)]
            counters["refresh"] += 1
            for dst, src in zip(live["inputs"], make_inputs(spec, w, seed, state.tensor_device)):
                dst.copy_(src)

    def after(name: str) -> None:
        if name != "candidate" or "outputs" not in live:
            return
        counters["candidate_calls"] += 1
        if counters["candidate_calls"] in snapshot_at:
            used = (counters["refresh"] - 1) % len(refresh_seeds) if refresh_seeds else -1
            snapshots.append((counters["candidate_calls"], used, [o.detach().clone() for o in live["outputs"]]))

    threads_cold = _thread_count()
    for fn in subjects.values():  # one untimed call each, so lazily started runtime pools exist before counting
        poison_scratch()
        fn()
    _sync(state.device)
    threads_before = _thread_count()
    if threads_before != threads_cold or msg.get("settle_threads") or \
            any(n not in (*CANDIDATE_KINDS, "eager", "copy", "copy-kernel") for n in subjects):
        # torch.compile and library baselines start pools asynchronously (inductor's compile workers): count only
        # once the number of threads has stopped moving, so the census after the timed calls is not confounded
        threads_before = _settled_thread_count()
    names_before = _thread_names()
    before_snap = gpu_snapshot() if state.device == "cuda" else {}
    try:
        samples = sample(subjects, policy, msg["seed"], before if refresh_seeds or live.get("scratch") else None,
                         after, poison_scratch if live.get("scratch") else None)
        _sync(state.device)
    except BaseException as e:  # noqa: BLE001
        text = traceback.format_exc()[-20000:]
        return {"ok": False, "stage": "runtime", "log": text, "error": f"{type(e).__name__}: {e}"[:2000],
                "cuda_fault": any(m in text for m in CUDA_FAULT_MARKERS)}
    after_snap = gpu_snapshot() if state.device == "cuda" else {}
    files = []
    if snapshots and msg.get("job_dir"):
        for call, used, outs in snapshots:
            path = Path(msg["job_dir"]) / f"timed{call}.pt"
            torch.save({"call": call, "refresh_seed_index": used, "outputs": [o.cpu() for o in outs]}, path)
            files.append(str(path))
    return {"ok": True, "samples": samples, "notes": notes, "gpu_before": before_snap, "gpu_after": after_snap,
            "snapshots": files, "threads": {"base": threads_before, "after": _thread_count(),
                                            "new": _new_threads(names_before)}}


HANDLERS = {"load": _load, "check": _check, "bench": _bench}


def _warm_runtime(torch) -> None:
    """Start torch's lazily created thread pools now, so the thread census around candidate calls is exact."""
    import io
    x = torch.randn(1 << 20)
    (x * 2).sum().item()
    torch.save(x[:16], io.BytesIO())


def worker_main(conn, device: str, log_path: str, job_root: str) -> None:
    """Entry point of a spawned worker."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # The worker decides the execution mode itself: an inherited TRITON_INTERPRET=1 would silently run
    # "cuda" jobs in the interpreter.
    if device == "cuda":
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch  # import before the first job so job timeouts do not include it
    import triton
    state = _State(device, Path(job_root))
    if device == "cuda":
        torch.cuda.init()
    # Runtime scratch of kernels that ask for it (device-side TMA descriptors, `tl.make_tensor_descriptor`):
    # the harness owns it, since candidates may not allocate, and zero-fills it, so it never holds old outputs.
    scratch_device = "cuda" if device == "cuda" else "cpu"
    triton.set_allocator(lambda size, alignment, stream: torch.zeros(size, dtype=torch.int8, device=scratch_device))
    _warm_runtime(torch)
    conn.send({"ok": True, "ready": True, "pid": os.getpid()})
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the controller is gone
        if msg.get("op") == "exit":
            return
        handler = HANDLERS.get(msg.get("op"))
        try:
            reply = handler(state, msg) if handler else {"ok": False, "stage": "protocol", "log": f"bad op {msg!r}"}
        except BaseException:  # noqa: BLE001 - report, never die silently
            text = traceback.format_exc()[-20000:]
            reply = {"ok": False, "stage": "runtime", "log": text, "error": text.splitlines()[-1][:2000],
                     "cuda_fault": any(m in text for m in CUDA_FAULT_MARKERS)}
        sys.stdout.flush()
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return

"""The worker process: imports candidate code, runs it on seeded inputs, times it. Never decides a verdict.

Protocol (dict messages over a multiprocessing pipe): `load`, `check`, `bench`, `exit`. Every reply has
`ok`; failures carry `stage` (import/compile/runtime) and `log`. Outputs travel back as files that the
controller reads; the controller compares them with a reference this process never sees.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from .aten import AtenRecorder
from .procutil import CUDA_FAULT_MARKERS, _import_file, _sync, _thread_count, mark_stage
from .timing import (BUILTIN_BASELINES, CANDIDATE_KINDS, _reference, _rotating_call, _scratch_of,  # noqa: F401
                     _subjects, bench, make_baseline)

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
    def __init__(self, device: str, job_root: Path, sandboxed: bool = True):
        self.device = device
        self.sandboxed = sandboxed
        self.sandbox = None   # execute.sandbox.Sandbox once armed (just before the first candidate import)
        self.tensor_device = "cuda" if device == "cuda" else "cpu"
        self.job_root = job_root
        self.modules: dict[str, object] = {}
        self.refs: dict[str, object] = {}
        self.compiled: dict[str, object] = {}


def _load(state: _State, msg: dict) -> dict:
    key = msg["source_hash"]
    if key in state.modules:
        return {"ok": True}
    mark_stage(state.job_root, "import")
    path = state.job_root / f"cand_{key[:16]}.py"
    path.write_text(msg["source"])
    if state.sandboxed and state.sandbox is None:
        from .sandbox import DENIAL_FILE, default_policy, install
        state.sandbox = install(default_policy([state.job_root], state.job_root / DENIAL_FILE))
    aten = AtenRecorder()   # what the import itself computes with torch (execute/aten.py; case -1: the import)
    try:
        with aten.case(-1):
            mod = _import_file(path, f"kernelloop_candidate_{key[:16]}")
    except BaseException as e:  # noqa: BLE001 - candidate code may raise anything, even SystemExit
        return {"ok": False, "stage": "import", "log": traceback.format_exc()[-20000:], "error": repr(e)[:500]}
    if not callable(getattr(mod, "launch", None)):
        return {"ok": False, "stage": "import", "log": "the candidate defines no callable `launch`",
                "error": "no launch"}
    state.modules[key] = mod
    return {"ok": True, "aten": aten.report().model_dump()}


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
    if state.sandbox is not None:
        state.sandbox.grant_write(msg["job_dir"])
    files, build, threads_base, alias, alias_case, returned = [], None, None, [], None, None
    aten = AtenRecorder()   # the ATen operations of every verification call (execute/aten.py)
    for k, case in enumerate(msg["cases"]):
        mark_stage(state.job_root, f"verify case {k}" if build is not None else f"build (first call, case {k})")
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
                with aten.case(k):
                    ret = mod.launch(*inputs, *outputs, **scratch, **spec.scalars, **msg["config"])
                _sync(state.device)
            except BaseException as e:  # noqa: BLE001
                text = traceback.format_exc()[-20000:]
                stage = "compile" if build is None and _is_compile_error(e) else "runtime"
                return {"ok": False, "stage": stage, "log": text, "error": f"{type(e).__name__}: {e}"[:2000],
                        "cuda_fault": any(m in text for m in CUDA_FAULT_MARKERS), "build": build, "case": k}
            if build is None:
                build = _build_info(mod, time.perf_counter() - t0, state.device)
                mark_stage(state.job_root, f"verify case {k}")
                threads_base = _thread_count()  # after the first call: lazily started runtime pools exist
            if ret is not None and returned is None:   # the contract: results go into the given outputs
                returned = {"case": k, "type": type(ret).__name__}
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
            "returned": returned, "threads": {"base": threads_base, "after": _thread_count()},
            "aten": aten.report().model_dump()}


HANDLERS = {"load": _load, "check": _check, "bench": bench}


def _warm_runtime(torch) -> None:
    """Start torch's lazily created thread pools now, so the thread census around candidate calls is exact."""
    import io
    x = torch.randn(1 << 20)
    (x * 2).sum().item()
    torch.save(x[:16], io.BytesIO())


def worker_main(conn, device: str, log_path: str, job_root: str, view: str = "") -> None:
    """Entry point of a spawned worker; `view`: what execute.confine did (reported in the ready message)."""
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
    from .pool import SANDBOX_ENV
    state = _State(device, Path(job_root), sandboxed=os.environ.pop(SANDBOX_ENV, "on") != "off")
    if device == "cuda":
        torch.cuda.init()
    # Runtime scratch of kernels that ask for it (device-side TMA descriptors, `tl.make_tensor_descriptor`):
    # the harness owns it, since candidates may not allocate, and zero-fills it, so it never holds old outputs.
    scratch_device = "cuda" if device == "cuda" else "cpu"
    triton.set_allocator(lambda size, alignment, stream: torch.zeros(size, dtype=torch.int8, device=scratch_device))
    _warm_runtime(torch)
    if view:
        print(f"kernelloop worker: {view}", flush=True)
    conn.send({"ok": True, "ready": True, "pid": os.getpid(), "view": view})
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
        if state.sandbox is not None:
            denied = state.sandbox.take_denials()
            if denied:
                reply["denied"] = [d.model_dump() for d in denied]
        sys.stdout.flush()
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return

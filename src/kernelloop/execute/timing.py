"""The worker's side of timing (`bench` requests): the subjects (candidate kinds and baselines) and the sampling.

Timed calls never see the same input contents twice: before every timed call the live input buffers get contents
drawn fresh for that call, from a seed drawn in this process from the OS's entropy (so no cache of earlier calls
can serve it, and no one can compute it ahead of the call). A few candidate calls, chosen the same way, get instead
a near-duplicate of the contents of an earlier call (a few elements changed, reference.inputs.perturb_): a cache
keyed on a sample of the contents returns the earlier answer there. The outputs of those calls and of the last call
go back as snapshot files with the seeds of their inputs, and the controller re-verifies them.
"""

from __future__ import annotations

import random
import traceback
from pathlib import Path
from typing import Callable

from .procutil import (CUDA_FAULT_MARKERS, _import_file, _new_threads, _settled_thread_count, _sync, _thread_count,
                       _thread_names, mark_stage)


def _reference(state, path: str):
    """The op's plain-PyTorch reference (eager and torch.compile baselines), imported once per file."""
    if path not in state.refs:
        state.refs[path] = _import_file(Path(path), f"kernelloop_worker_ref_{len(state.refs)}").reference
    return state.refs[path]


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


def _subjects(state, msg: dict) -> tuple[dict, dict, dict]:
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


def snapshot_plan(policy, snapshots: int) -> dict:
    """Which candidate calls are re-verified: `snapshots` calls drawn from the OS's entropy among calls 2.. (their
    inputs a near-duplicate of an earlier call's), and the last call and any after it (fresh contents; the CUDA
    timer re-takes a sample whose launch was exposed, so there may be more calls than planned)."""
    calls = policy.calls_per_sample * policy.samples
    if snapshots <= 0:
        return {"on": False, "near": set(), "last": calls + 1}
    pool = list(range(2, calls))
    return {"on": True, "near": set(random.SystemRandom().sample(pool, min(snapshots, len(pool)))), "last": calls}


def bench(state, msg: dict) -> dict:
    import torch

    from ..bench.timer import gpu_snapshot, sample
    from ..records import OpSpec, TimingPolicy, Workload
    from ..reference.inputs import make_inputs, perturb_, poison_
    policy = TimingPolicy.model_validate_json(msg["policy"])
    mark_stage(state.job_root, "timing (set-up)")
    box = getattr(state, "sandbox", None)
    if box is not None:   # the op's folder (reference, baselines) and this job's folder, named by the controller
        for key in ("reference_file", "baselines_file"):
            if msg.get(key):
                box.grant_read(Path(msg[key]).parent)
        if msg.get("job_dir"):
            box.grant_write(msg["job_dir"])
    subjects, notes, live = _subjects(state, msg)
    spec = OpSpec.model_validate_json(msg["spec"])
    w = Workload.model_validate_json(msg["workload"])
    fresh = bool(msg.get("fresh_inputs"))
    plan = snapshot_plan(policy, int(msg.get("snapshots") or 0))
    counters = {"candidate_calls": 0}
    contents = {"last_fresh": None, "pending": None}
    snapshots = []
    entropy = random.SystemRandom()

    def poison_scratch(name: str | None = None) -> None:
        # The workspaces poisoned again before every call (outside the timed interval): nothing a call leaves
        # there, such as a copy of its answer and a fingerprint of its inputs, survives to the next call.
        for t in live.get("scratch", ()):
            poison_(t)

    def before(name: str) -> None:
        poison_scratch(name)
        # New input contents behind the same pointers before every timed call, never seen before: caches keyed by
        # pointer, id or content cannot serve them; near-duplicates catch caches keyed on a sample of the contents.
        if not fresh:
            return
        upcoming = counters["candidate_calls"] + 1
        if name == "candidate" and upcoming in plan["near"] and contents["last_fresh"] is not None:
            entry = {"seed": contents["last_fresh"], "perturb": entropy.getrandbits(63)}
        else:
            entry = {"seed": entropy.getrandbits(63), "perturb": None}
            if name == "candidate":
                contents["last_fresh"] = entry["seed"]
        new = make_inputs(spec, w, entry["seed"], state.tensor_device)
        if entry["perturb"] is not None:
            perturb_(spec, new, entry["perturb"])
        for dst, src in zip(live["inputs"], new):
            dst.copy_(src)
        if name == "candidate":
            contents["pending"] = entry

    def after(name: str) -> None:
        if name != "candidate" or "outputs" not in live:
            return
        counters["candidate_calls"] += 1
        c = counters["candidate_calls"]
        if fresh and plan["on"] and (c in plan["near"] or c >= plan["last"]):
            entry = contents["pending"] or {"seed": None, "perturb": None}
            snapshots.append((c, entry, [o.detach().clone() for o in live["outputs"]]))

    mark_stage(state.job_root, "timing (warm-up)")
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
        mark_stage(state.job_root, "timing (samples)")
        samples = sample(subjects, policy, msg["seed"], before if fresh or live.get("scratch") else None,
                         after, poison_scratch if live.get("scratch") else None)
        _sync(state.device)
    except BaseException as e:  # noqa: BLE001
        text = traceback.format_exc()[-20000:]
        return {"ok": False, "stage": "runtime", "log": text, "error": f"{type(e).__name__}: {e}"[:2000],
                "cuda_fault": any(m in text for m in CUDA_FAULT_MARKERS)}
    after_snap = gpu_snapshot() if state.device == "cuda" else {}
    files = []
    if snapshots and msg.get("job_dir"):
        for call, entry, outs in snapshots:
            path = Path(msg["job_dir"]) / f"timed{call}.pt"
            torch.save({"call": call, "seed": entry["seed"], "perturb": entry["perturb"],
                        "outputs": [o.cpu() for o in outs]}, path)
            files.append(str(path))
    return {"ok": True, "samples": samples, "notes": notes, "gpu_before": before_snap, "gpu_after": after_snap,
            "snapshots": files, "threads": {"base": threads_before, "after": _thread_count(),
                                            "new": _new_threads(names_before)}}

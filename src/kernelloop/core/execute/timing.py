"""The worker's side of timing (`bench` requests, execute.protocol.BenchRequest): the subjects (candidate kinds and
baselines, core/execute/baselines.py) and the sampling.

Timed calls never see the same input contents twice: before every timed call the live input buffers get contents
drawn fresh for that call, from a seed drawn in this process from the OS's entropy (so no cache of earlier calls
can serve it, and no one can compute it ahead of the call). A few candidate calls, chosen the same way, get instead
a near-duplicate of the contents of an earlier call (a few elements changed, reference.inputs.perturb_): a cache
keyed on a sample of the contents returns the earlier answer there. The outputs of those calls and of the last call
(copied right after each call) are shared with the controller with the seeds of their inputs (core/execute/shared.py),
and the controller re-verifies them.

Every output set and workspace of a candidate-kind subject lies inside a guarded backing (core/reference/guards.py)
whose sentinel is written once, at allocation; after the timing phase the worker shares the backings of every set
(`Benched.guards`, `timed_sets` of them) by the snapshots' path, and the controller checks their guard zones
(core/execute/timed.py): a write outside the buffers in any timed call is seen. Baselines' outputs are not guarded.
"""

from __future__ import annotations

import random
import traceback
from pathlib import Path

from . import protocol as P
from .baselines import cached_reference, make_baseline
from ..sandbox.census import new_threads, settled_thread_count, thread_count, thread_names
from .procutil import CUDA_FAULT_MARKERS, _sync, mark_stage
from .shared import resolve_transport


CANDIDATE_KINDS = ("candidate", "candidate-twin", "candidate-same")


def timed_sets(subjects: list[str], sets: int) -> int:
    """How many guarded buffer sets (outputs and workspace) the timed calls of the candidate kinds among `subjects`
    write, as the worker allocates them (`_subjects`) and the controller expects them back: the `sets` rotating
    sets, or with one set the candidate's (shared by "candidate-same") and the twin's own."""
    kinds = {n for n in subjects if n in CANDIDATE_KINDS}
    if not kinds:
        return 0
    if sets > 1:
        return sets
    return int("candidate-twin" in kinds) + int(bool(kinds - {"candidate-twin"}))


def _guarded_set(spec, w, dev, live: dict) -> tuple[list, dict]:
    """A fresh output set and workspace inside guarded backings (core/reference/guards.py: the sentinel is written here,
    once, and never again), listed in live["guards"] (shared with the controller after the timing phase) and the
    workspace in live["scratch"] (poisoned before every sample: the buffer only, never its guards)."""
    from ..reference.inputs import alloc_guarded_outputs, alloc_guarded_scratch
    outputs, backings = alloc_guarded_outputs(spec, w, dev)
    kw, scratch_backing = alloc_guarded_scratch(spec, w, dev)
    live.setdefault("guards", []).append((backings, scratch_backing))
    if kw:
        live.setdefault("scratch", []).append(kw["scratch"])
    return outputs, kw


def _rotating_call(mod, cfg: dict, inputs: list, scalars: dict, live: dict, spec, w, dev, sets: int, *, start: int,
                   is_candidate: bool):
    """A call of the candidate's kernel that writes the next of `sets` shared output sets each time.

    Every candidate-kind subject cycles through the same sets from its own starting offset, so no subject is
    tied to one placement of its outputs in memory (on the H200 a ~7 µs kernel timed > 2 % faster than its A/A
    twin with its own output buffers in 39 of 40 comparisons). The candidate's latest set is `live["outputs"]`:
    the snapshot of a timed call reads the buffers that call wrote. Each set and its workspace lie in guarded
    backings (`_guarded_set`).
    """
    pool = live.get("pool")
    if pool is None:
        made = [_guarded_set(spec, w, dev, live) for _ in range(sets)]
        pool = live["pool"] = [outputs for outputs, _ in made]
        live["scratch_pool"] = [kw for _, kw in made]
    if "scratch_pool" not in live:
        # a pool handed in without workspaces: each set gets its own (where the kernel's writes land rotates too)
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


def _subjects(state, msg: P.BenchRequest, spec) -> tuple[dict, dict, dict]:
    """Callables for each subject requested; notes say why a requested baseline is unavailable."""
    from ..reference.inputs import make_inputs
    sets = msg.policy.output_sets
    w = msg.workload
    dev = state.tensor_device
    inputs = make_inputs(spec, w, msg.seed, dev)
    scalars = spec.scalars
    subjects, notes = {}, {}
    live = {"inputs": inputs}
    for name in msg.subjects:
        try:
            if name in CANDIDATE_KINDS:
                # A/A experiments: the twin is the same kernel with its own output buffers; "candidate-same" is the
                # same kernel writing the candidate's very buffers (only the subject's name differs)
                mod = state.modules[msg.source_hash]
                cfg = msg.config
                if sets > 1:
                    subjects[name] = _rotating_call(mod, cfg, inputs, scalars, live, spec, w, dev, sets,
                                                    start=sum(n in CANDIDATE_KINDS for n in subjects),
                                                    is_candidate=name == "candidate")
                    continue
                if name == "candidate-twin":
                    outputs, scratch = _guarded_set(spec, w, dev, live)
                else:   # "candidate" and "candidate-same": one set, outputs and workspace
                    if "outputs" not in live:
                        live["outputs"], live["own_scratch"] = _guarded_set(spec, w, dev, live)
                    outputs, scratch = live["outputs"], live["own_scratch"]
                subjects[name] = lambda mod=mod, outputs=outputs, cfg=cfg, scratch=scratch: \
                    mod.launch(*inputs, *outputs, **scratch, **scalars, **cfg)
            else:
                ref_file = msg.reference_file or None
                subjects[name] = make_baseline(
                    name, inputs, scalars, reference_file=ref_file, baselines_file=msg.baselines_file or None,
                    bytes_moved=msg.bytes_moved, device=dev,
                    load_reference=lambda path: cached_reference(state.refs, path), compiled=state.compiled,
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


def _shared_snapshots(state, msg: P.BenchRequest, snapshots: list) -> tuple[list[P.Snapshot], str, str]:
    """The snapshots alone shared with the controller (`_shared_timed` without guarded buffers)."""
    shots, _, transport, why = _shared_timed(state, msg, snapshots, [])
    return shots, transport, why


def _shared_timed(state, msg: P.BenchRequest, snapshots: list, guards: list
                  ) -> tuple[list[P.Snapshot], list[P.TimedBuffers], str, str]:
    """The snapshots' outputs and the guarded backings of every candidate output set and workspace (`guards`: pairs
    of the set's output backings and its workspace's backing or None) shared with the controller (core/execute/shared.py),
    the transport that ran and why CUDA IPC did not: by CUDA IPC on a GPU where asked for and the driver exports,
    else in one arena in the job folder (on a GPU a host copy, taken now that every timed call has returned)."""
    from .shared import Arena, share_cuda
    transport, why = resolve_transport(state.device, msg.transport), ""
    flat = [o for _, _, outs in snapshots for o in outs]
    flat += [t for outs, scratch in guards for t in (*outs, *([scratch] if scratch is not None else []))]
    state.shared = flat
    if transport == "cuda-ipc":
        try:
            return _timed_records(snapshots, guards, [share_cuda(t) for t in flat]) + (transport, "")
        except Exception as e:  # noqa: BLE001 - no IPC here: the host arena, and the reply says why
            why, transport = f"{type(e).__name__}: {e}"[:500], "host-arena"
    arena = Arena(Path(msg.job_dir) / "timed.arena", flat)
    state.shared = [arena]
    return _timed_records(snapshots, guards, arena.records) + (transport, why)


def _timed_records(snapshots: list, guards: list, records: list) -> tuple[list[P.Snapshot], list[P.TimedBuffers]]:
    """The reply's records of `_shared_timed`'s tensors, `records` in its flat order."""
    rest = iter(records)
    shots = [P.Snapshot(call=call, seed=entry["seed"], perturb=entry["perturb"],
                        outputs=[next(rest) for _ in outs]) for call, entry, outs in snapshots]
    sets = [P.TimedBuffers(outputs=[next(rest) for _ in outs], scratch=next(rest) if scratch is not None else None)
            for outs, scratch in guards]
    return shots, sets


def _grant(state, msg: P.BenchRequest) -> None:
    """The sandbox's grants of a timing request: the op's folder (reference, baselines) to read and this job's folder,
    named by the controller, to write."""
    box = getattr(state, "sandbox", None)
    if box is None:
        return
    for path in (msg.reference_file, msg.baselines_file):
        if path:
            box.grant_read(Path(path).parent)
    if msg.job_dir:
        box.grant_write(msg.job_dir)


def bench(state, msg: P.BenchRequest) -> P.Benched | P.Failed:
    from ..bench.timer import gpu_snapshot, sample
    policy = msg.policy
    mark_stage(state.job_root, "timing (set-up)")
    _grant(state, msg)
    if msg.source_hash not in state.modules and any(n in CANDIDATE_KINDS for n in msg.subjects):
        return P.not_loaded(msg.source_hash)   # a worker started since the load: the controller loads again
    spec = state.specs.get(msg.spec)
    subjects, notes, live = _subjects(state, msg, spec)
    fresh = msg.fresh_inputs
    snapshots = []
    poison_scratch, before, after = _call_hooks(state, spec, msg.workload, live, fresh,
                                                snapshot_plan(policy, msg.snapshots), snapshots)
    mark_stage(state.job_root, "timing (warm-up)")
    threads_before = _warm_up(state, msg, subjects, poison_scratch)
    names_before = thread_names()
    before_snap = gpu_snapshot() if state.device.is_cuda else {}
    try:
        mark_stage(state.job_root, "timing (samples)")
        samples = sample(subjects, policy, msg.seed, before if fresh or live.get("scratch") else None,
                         after, poison_scratch if live.get("scratch") else None)
        _sync(state.device)
    except BaseException as e:  # noqa: BLE001
        text = traceback.format_exc()[-20000:]
        return P.Failed(stage="runtime", log=text, error=f"{type(e).__name__}: {e}"[:2000],
                        cuda_fault=any(m in text for m in CUDA_FAULT_MARKERS))
    after_snap = gpu_snapshot() if state.device.is_cuda else {}
    # the census right after the calls, before sharing: a first CUDA IPC export may start a thread of torch's own
    threads = P.ThreadCensus(base=threads_before, after=thread_count(), new=new_threads(names_before))
    guards = live.get("guards", [])
    shots, sets, transport, why = _shared_timed(state, msg, snapshots, guards) \
        if (snapshots or guards) and msg.job_dir else ([], [], resolve_transport(state.device, msg.transport), "")
    return P.Benched(samples=samples, notes=notes, gpu_before=before_snap, gpu_after=after_snap, snapshots=shots,
                     guards=sets, transport=transport, transport_error=why, threads=threads)


def _call_hooks(state, spec, w, live: dict, fresh: bool, plan: dict, snapshots: list):
    """The hooks `sample` runs around every call: (poison_scratch, before, after). `before` poisons the scratch
    and, with fresh inputs, writes new contents behind the same pointers (near-duplicates of the last fresh ones
    at the snapshot plan's calls); `after` counts the candidate's calls and appends the planned output snapshots
    to `snapshots` as (call, inputs entry, outputs)."""
    from ..reference.inputs import make_inputs, perturb_, poison_
    counters = {"candidate_calls": 0}
    contents = {"last_fresh": None, "pending": None}
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

    return poison_scratch, before, after


def _warm_up(state, msg: P.BenchRequest, subjects: dict, poison_scratch) -> int:
    """One untimed call of each subject, so lazily started runtime pools exist before counting; the thread count
    the census after the timed calls is compared with."""
    threads_cold = thread_count()
    for fn in subjects.values():
        poison_scratch()
        fn()
    _sync(state.device)
    threads_before = thread_count()
    if threads_before != threads_cold or msg.settle_threads or \
            any(n not in (*CANDIDATE_KINDS, "eager", "copy", "copy-kernel") for n in subjects):
        # torch.compile and library baselines start pools asynchronously (inductor's compile workers): count only
        # once the number of threads has stopped moving, so the census after the timed calls is not confounded
        threads_before = settled_thread_count()
    return threads_before

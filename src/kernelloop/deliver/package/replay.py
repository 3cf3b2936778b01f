"""Launch replay: a decided shape's Triton launches, issued again through their compiled handles.

A winner's `launch` is Python: it reads shapes and strides, builds the grid, and calls `kernel[grid](...)`, whose
JIT path binds every argument, specialises it, and looks the compiled kernel up on every call -- tens of
microseconds of host time when the kernel itself takes a few. For one (dtype, device, shape) plan that work
gives the same answer every time, so the package runtime records it: the first call of a plan runs `launch`
with Triton's JIT run wrapped, noting each launch's compiled kernel, grid and arguments, with every tensor
argument mapped to the call's tensor it is (inputs, outputs, scratch); the second call records again and must
give the same recording with other tensors. From the third call on, the plan's launches go straight to each
compiled kernel's launcher with the call's tensors in place.

A launch is replayed only when that is provably the same work:
- every ATen operation the launch issues is metadata or a view (an allocation, copy or fill inside `launch` is
  work the replay would skip, so such a launch keeps the JIT path);
- every tensor argument is one of the call's tensors, whole (same data pointer, dtype and element count) -- or a
  Triton tensor descriptor over one;
- the two recordings agree: the same compiled kernels, grids and non-tensor arguments, the same tensor mapping;
- no launch hook is set (a profiler that sets Triton's launch hooks sees the JIT path), and the Triton version
  has the launcher protocol this module speaks (3.3 and later).
Otherwise the plan says why and keeps the JIT path; nothing about the decision of *which* kernel runs changes.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ATen operations that compute and write nothing: a launch that issues only these may be replayed.
METADATA_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
    "select", "slice", "narrow", "alias", "detach", "flatten", "unflatten", "_reshape_alias", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "contiguous", "is_pinned"})

_lock = threading.Lock()


def _triton_speaks_protocol() -> bool:
    import triton
    try:
        major, minor = (int(p) for p in triton.__version__.split("+")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (3, 3)


def _hooks_set() -> bool:
    """Whether a launch hook would see launches (None, or an empty chain as Triton 3.9 keeps by default, see none)."""
    from triton import knobs
    return any(h is not None and getattr(h, "calls", True)
               for h in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook))


class _Seen(TorchDispatchMode):
    """Notes the ATen operations issued inside `launch` that are not metadata."""

    def __init__(self):
        super().__init__()
        self.work: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in METADATA_OPS:
            self.work.append(str(func))
        return func(*args, **(kwargs or {}))


class _Launch:
    """One recorded launch: the compiled kernel, its grid, and each argument (slot index, or -1 and the value)."""

    __slots__ = ("kernel", "grid", "slots", "values", "descriptors")

    def __init__(self, kernel, grid, slots, values, descriptors):
        self.kernel, self.grid, self.slots, self.values, self.descriptors = kernel, grid, slots, values, descriptors

    def same(self, other: "_Launch") -> bool:
        return (self.kernel is other.kernel and self.grid == other.grid and self.slots == other.slots
                and self.descriptors == other.descriptors
                and all(a is b or (s >= 0) or _equal(a, b) for s, a, b in zip(self.slots, self.values, other.values)))


def _equal(a, b) -> bool:
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and all(_equal(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a) if f.name != "base")
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
        return False


def _slot_of(t: torch.Tensor, tensors) -> int:
    for i, c in enumerate(tensors):
        if c.data_ptr() == t.data_ptr() and c.dtype == t.dtype and c.numel() == t.numel() and c.device == t.device:
            return i
    return -1


class Recording:
    """What one `launch` call issued: its launches, or why it cannot be replayed."""

    def __init__(self):
        self.launches: list[_Launch] = []
        self.why_not = ""

    def same(self, other: "Recording") -> bool:
        return len(self.launches) == len(other.launches) and all(a.same(b) for a, b in zip(self.launches,
                                                                                            other.launches))


def _note(rec: Recording, jit, kernel, grid, args, kwargs, tensors) -> None:
    if hasattr(kernel, "result"):
        kernel = kernel.result()
    params = jit.signature.parameters
    bound = jit.signature.bind(*args, **{k: v for k, v in kwargs.items() if k in params})
    bound.apply_defaults()
    values = list(bound.arguments.values())
    if callable(grid):
        grid = grid(bound.arguments)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    slots, descriptors = [], []
    for k, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            s = _slot_of(v, tensors)
            if s < 0:
                rec.why_not = (f"{jit.__name__ if hasattr(jit, '__name__') else 'a kernel'} takes a tensor that is "
                               "not one of the call's, whole")
            elif v.data_ptr() % 16:
                rec.why_not = "a tensor argument is not 16-byte aligned"
            slots.append(s)
            descriptors.append(False)
            values[k] = None      # the recording keeps no tensor of the call alive
        elif dataclasses.is_dataclass(v) and isinstance(getattr(v, "base", None), torch.Tensor):
            s = _slot_of(v.base, tensors)
            if s < 0:
                rec.why_not = "a tensor descriptor over a tensor that is not one of the call's"
            slots.append(s)
            descriptors.append(True)
            values[k] = copy.copy(v)
            values[k].base = None
        else:
            slots.append(-1)
            descriptors.append(False)
    rec.launches.append(_Launch(kernel, grid, tuple(slots), values, tuple(descriptors)))


@contextmanager
def _recording(rec: Recording, tensors):
    from triton.runtime.jit import JITFunction
    original = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        kernel = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        if not warmup and kernel is not None:
            try:
                _note(rec, self, kernel, grid, args, kwargs, tensors)
            except Exception as e:  # noqa: BLE001 - a launch we cannot read is one we do not replay
                rec.why_not = f"a launch could not be recorded: {type(e).__name__}: {e}"
        return kernel

    with _lock:
        JITFunction.run = run
        try:
            yield
        finally:
            JITFunction.run = original


def record(tensors: list[torch.Tensor], call) -> Recording:
    """Run `call()` (which calls `launch` with `tensors`) once, recording its launches."""
    rec = Recording()
    seen = _Seen()
    with _recording(rec, tensors), seen:
        call()
    if seen.work and not rec.why_not:
        rec.why_not = f"the launch issues ATen work ({seen.work[0]}), which a replay would skip"
    if not rec.launches and not rec.why_not:
        rec.why_not = "the launch issued no Triton kernel"
    return rec


class Replay:
    """A plan's launches, issued through their compiled kernels' launchers."""

    __slots__ = ("steps",)

    def __init__(self, rec: Recording):
        self.steps = []
        for ln in rec.launches:
            k = ln.kernel
            run = k.run   # loads the module and builds the launcher now, not on the first replayed call
            pos = [(i, s, d) for i, (s, d) in enumerate(zip(ln.slots, ln.descriptors)) if s >= 0]
            self.steps.append((run, ln.grid, k.function, k.packed_metadata, list(ln.values), pos))

    def __call__(self, tensors, device_index: int) -> None:
        stream = _raw_stream(device_index)
        for run, (g0, g1, g2), function, metadata, values, pos in self.steps:
            args = values.copy()
            for i, s, d in pos:
                if d:
                    desc = copy.copy(args[i])
                    desc.base = tensors[s]
                    args[i] = desc
                else:
                    args[i] = tensors[s]
            run(g0, g1, g2, stream, function, metadata, None, None, None, *args)


def observe(plan, tensors, scalars: dict, call) -> str:
    """One of a plan's first calls: run `call()` (its `launch` on `tensors`) recording the launches. The first
    recording is kept on the plan (`plan.recording`, `plan.replay_scalars`); a second one that matches it becomes
    `plan.replay`. Returns why the plan keeps the JIT path ('' while replay is still possible)."""
    why = replay_possible()
    if why:
        call()
        return why
    rec = record(tensors, call)
    if rec.why_not:
        plan.recording = None
        return rec.why_not
    if plan.recording is None:
        plan.recording, plan.replay_scalars = rec, dict(scalars)
        return ""
    first, plan.recording = plan.recording, None
    if not first.same(rec) or scalars != plan.replay_scalars:
        return "two calls of the same shape issued different launches"
    plan.replay = Replay(rec)
    return ""


def _raw_stream(device_index: int) -> int:
    return torch.cuda.current_stream(device_index).cuda_stream


if hasattr(torch._C, "_cuda_getCurrentRawStream"):   # what Triton's own launch path reads: no Stream object
    _raw_stream = torch._C._cuda_getCurrentRawStream  # noqa: F811


def replay_possible() -> str:
    """'' when this process may replay launches, else why not."""
    if not _triton_speaks_protocol():
        import triton
        return f"Triton {triton.__version__} predates the launcher protocol replay speaks (3.3)"
    if _hooks_set():
        return "a Triton launch hook is set"
    return ""

"""The baselines the worker times beside a candidate, and that the profiling harness runs under Nsight Compute.

Every op has `eager` (its plain-PyTorch reference on op-dtype inputs), `torch.compile` (that reference compiled),
`copy` (a device copy of the op's minimum bytes) and `copy-kernel` (the same bytes through an elementwise kernel);
other names come from the op's `baselines.py` (its BASELINES table of factories).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .procutil import _import_file


def cached_reference(refs: dict, path: str):
    """The op's plain-PyTorch reference (eager and torch.compile baselines), imported once per file into `refs`."""
    if path not in refs:
        refs[path] = _import_file(Path(path), f"kernelloop_worker_ref_{len(refs)}").reference
    return refs[path]


BUILTIN_BASELINES = ("eager", "torch.compile", "copy", "copy-kernel")
"""Baselines every op has: its reference on op-dtype inputs, that reference under torch.compile, and a device copy
of the op's minimum bytes. Other names come from the op's `baselines.py` (its BASELINES table)."""


def make_baseline(name: str, inputs: list, scalars: dict, *, reference_file: str | None = None,
                  baselines_file: str | None = None, bytes_moved: float = 0.0, device: str = "cpu",
                  load_reference: Callable[[str], Callable] | None = None, compiled: dict | None = None,
                  compile_key: str = "") -> Callable[[], object]:
    """A zero-argument callable running baseline `name` on `inputs`: what the worker times, and what the
    profiling harness (`kernelloop.tune.profile.harness`, baseline mode) runs under Nsight Compute.

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

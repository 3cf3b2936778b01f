"""Running an edited PTX in place of a Triton kernel's own, through Triton's IR override.

Triton (3.6 and 3.9 alike) has a compile option `ir_override`: the path of an IR file (`*.ttir|ttgir|llir|ptx`)
that replaces the stage of that extension when the kernel is compiled (`CUDAOptions.ir_override`; compiler.py:
"Users can override kernels at scale by setting `ir_override`"). Every earlier stage still runs, so the kernel's
metadata (shared memory, warps, the launcher built for its signature) is the original's; ptxas (Triton's own, with
Triton's flags) assembles the replacement; the option is part of the kernel's cache key, so the overridden and the
original kernel live side by side. Launch keyword arguments that name options reach the compiler, so
`kernel[grid](..., ir_override=path)` is all a launch needs.

A template's `launch` calls its kernels itself, so `PtxOverrides` patches `JITFunction.run` while installed: for a
kernel whose name has an edit, it first compiles the launch as it stands (no launch: `warmup=True`; cached after
the first time) and reads the PTX Triton made; only when that PTX is the one the edit was made from (its sha256)
does the launch run with `ir_override`. Another specialisation of the same kernel (another shape's divisibility,
another constexpr) makes other PTX and runs unedited: an edit never lands on code it was not proved on.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import Counter
from pathlib import Path

_LOCK = threading.Lock()


class PtxOverrides:
    """Edited PTX files by kernel name and by the sha256 of the PTX each replaces."""

    def __init__(self, files: dict[str, dict[str, str | Path]]):
        self.files = {name: {sha: str(p) for sha, p in by_sha.items()} for name, by_sha in files.items()}
        self.hits: Counter = Counter()     # kernel name -> launches that ran the edited PTX
        self.misses: Counter = Counter()   # kernel name -> launches whose PTX was not the edited one's original
        self._sha: dict[int, tuple[object, str]] = {}   # id -> (compiled kernel, sha256 of its PTX)

    def _ptx_sha(self, kernel) -> str:
        seen = self._sha.get(id(kernel))
        if seen is not None and seen[0] is kernel:   # the object is held, so its id is not another's
            return seen[1]
        sha = hashlib.sha256(kernel.asm["ptx"].encode()).hexdigest()
        self._sha[id(kernel)] = (kernel, sha)
        return sha

    def kwargs(self, jit, run, args: tuple, grid, kwargs: dict) -> dict:
        """`kwargs` for this launch: with `ir_override` when the launch compiles to an edited PTX's original."""
        name = getattr(jit, "__name__", "") or getattr(getattr(jit, "fn", None), "__name__", "")
        edits = self.files.get(name)
        if not edits or "ir_override" in kwargs:
            return kwargs
        plain = run(jit, *args, grid=grid, warmup=True, **kwargs)
        if hasattr(plain, "result"):   # an asynchronous compile: wait for it
            plain = plain.result()
        path = edits.get(self._ptx_sha(plain)) if plain is not None else None
        if path is None:
            self.misses[name] += 1
            return kwargs
        self.hits[name] += 1
        return {**kwargs, "ir_override": path}

    @contextlib.contextmanager
    def installed(self):
        """While inside, every Triton launch in this process goes through `kwargs` (one patch at a time)."""
        from triton.runtime.jit import JITFunction
        with _LOCK:
            original = JITFunction.run
            overrides = self

            def run(jit, *args, grid, warmup, **kwargs):
                kwargs = overrides.kwargs(jit, original, args, grid, kwargs)
                return original(jit, *args, grid=grid, warmup=warmup, **kwargs)
            JITFunction.run = run
            try:
                yield self
            finally:
                JITFunction.run = original


def write_files(folder: Path, edits: dict[str, tuple[str, str]]) -> dict[str, dict[str, str]]:
    """Write each kernel's edited PTX ({name: (original sha256, edited PTX)}) as `<sha of the edit>.ptx` in
    `folder` (content-addressed: Triton's cache key holds the path, so one path never means two texts)."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[str, str]] = {}
    for name, (sha, text) in edits.items():
        path = folder / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.ptx"
        path.write_text(text)
        out.setdefault(name, {})[sha] = str(path)
    return out

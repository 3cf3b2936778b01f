"""Measure the roofs of the roofline once per device, and cache them.

Measured, not datasheet: a device copy reaches ~70 % of HBM's nominal bandwidth on an H200 (20.0 us for a
67 MB LayerNorm-sized copy; docs/timing.md), and that copy is the honest "physical limit" for a memory-bound op.
- copy bandwidth: `dst.copy_(src)` on buffers far larger than L2; (read + written bytes) / median time;
- matrix throughput: `torch.matmul` of square matrices in fp16, bf16, tf32 and fp32 (TF32 off), 2 n^3 / time;
- vector throughput: a Triton kernel whose threads run independent FMA chains in registers (no memory
  traffic in the loop), 2 FLOPs per FMA.
Every number is the median of CUDA-event timings after warm-up.

The cache is one JSON file (`$KERNELLOOP_CACHE_DIR/ceilings.json`, default `~/.cache/kernelloop/`):

    {"format": "kernelloop-ceilings", "version": 1,
     "entries": {"<device>|driver=<driver>|torch=<torch>": {<Ceilings record>}, ...}}

Ceilings are valid only for the device, driver and torch version they were measured under, which is
exactly the key; a different driver or torch means measuring again.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...base.records import Ceilings, ceilings_key

CACHE_FORMAT = "kernelloop-ceilings"
CACHE_VERSION = 1


class CeilingsCacheError(ValueError):
    """The cache file exists but is not a ceilings cache this code can read."""


def cache_path() -> Path:
    """`$KERNELLOOP_CACHE_DIR/ceilings.json`, default `~/.cache/kernelloop/ceilings.json`."""
    base = os.environ.get("KERNELLOOP_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kernelloop")
    return Path(base) / "ceilings.json"


def load_cache(path: str | os.PathLike | None = None) -> dict[str, Ceilings]:
    """All cached ceilings by key; {} when the file does not exist. Raises CeilingsCacheError if malformed."""
    p = Path(path) if path is not None else cache_path()
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise CeilingsCacheError(f"{p}: not JSON ({e})") from e
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        raise CeilingsCacheError(f"{p}: not a {CACHE_FORMAT} file")
    if data.get("version") != CACHE_VERSION:
        raise CeilingsCacheError(f"{p}: cache version {data.get('version')!r}, this code reads {CACHE_VERSION}")
    out = {}
    for key, entry in (data.get("entries") or {}).items():
        c = Ceilings.model_validate(entry)
        if c.key != key:
            raise CeilingsCacheError(f"{p}: entry {key!r} holds ceilings of {c.key!r}")
        out[key] = c
    return out


def store_ceilings(ceilings: Ceilings, path: str | os.PathLike | None = None) -> Path:
    """Add or replace one entry; the file is rewritten atomically (temp file + rename)."""
    p = Path(path) if path is not None else cache_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    entries = {k: v.model_dump(mode="json") for k, v in load_cache(p).items()}
    entries[ceilings.key] = ceilings.model_dump(mode="json")
    doc = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "entries": dict(sorted(entries.items()))}
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".ceilings-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
    os.replace(tmp, p)
    return p


def cached_ceilings(device: str, driver: str, torch_version: str,
                    path: str | os.PathLike | None = None) -> Ceilings | None:
    """The cached ceilings of exactly this device, driver and torch version, or None."""
    return load_cache(path).get(ceilings_key(device, driver, torch_version))


# -- measurement (CUDA) -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CeilingPlan:
    """Sizes and repetitions of the ceiling measurements."""

    copy_bytes: int = 1 << 30        # per buffer; far above any L2
    matmul_n: int = 8192
    vector_elems: int = 1 << 22
    vector_iters: int = 1024
    warmup: int = 3
    reps: int = 15
    matrix_dtypes: tuple[str, ...] = ("fp16", "bf16", "tf32", "fp32")
    vector_dtypes: tuple[str, ...] = ("fp16", "bf16", "fp32")


def _median_ms(fn: Callable[[], object], warmup: int, reps: int) -> float:
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_copy_gbps(plan: CeilingPlan = CeilingPlan()) -> float:
    """Device-to-device copy bandwidth: 2 x bytes / median time, GB/s."""
    import torch
    src = torch.empty(plan.copy_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), plan.warmup, plan.reps)
    return 2 * plan.copy_bytes / (ms * 1e-3) / 1e9


def measure_matrix_tflops(dtype: str, plan: CeilingPlan = CeilingPlan()) -> float:
    """Dense square matmul throughput, TFLOP/s ('tf32' = fp32 inputs with TF32 allowed, 'fp32' = TF32 off)."""
    import torch
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, "fp32": torch.float32}[dtype]
    n = plan.matmul_n
    a = torch.randn(n, n, device="cuda", dtype=tdtype)
    b = torch.randn(n, n, device="cuda", dtype=tdtype)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        ms = _median_ms(lambda: torch.matmul(a, b), plan.warmup, plan.reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return 2 * n ** 3 / (ms * 1e-3) / 1e12


def measure_vector_tflops(dtype: str, plan: CeilingPlan = CeilingPlan()) -> float:
    """Elementwise FMA throughput of independent register chains, TFLOP/s (2 FLOPs per FMA)."""
    import torch
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    from ._fma import CHAINS, fma_chains as kernel
    block = 1024
    x = torch.rand(plan.vector_elems, device="cuda", dtype=tdtype)
    y = torch.empty_like(x)
    grid = (plan.vector_elems // block,)
    ms = _median_ms(lambda: kernel[grid](x, y, plan.vector_iters, BLOCK=block, num_warps=4), plan.warmup, plan.reps)
    return 2 * CHAINS * plan.vector_iters * plan.vector_elems / (ms * 1e-3) / 1e12


def measure_ceilings(plan: CeilingPlan = CeilingPlan(), driver: str | None = None) -> Ceilings:
    """Measure every ceiling of CUDA device 0 (needs a GPU)."""
    import torch

    from ...core.device import driver_version
    from ._fma import CHAINS
    props = torch.cuda.get_device_properties(0)
    copy = measure_copy_gbps(plan)
    matrix = {d: measure_matrix_tflops(d, plan) for d in plan.matrix_dtypes}
    vector = {d: measure_vector_tflops(d, plan) for d in plan.vector_dtypes}
    method = (f"copy: dst.copy_(src) of {plan.copy_bytes} B, 2x bytes / median of {plan.reps}; "
              f"matrix: torch.matmul {plan.matmul_n}^3, 2n^3 / median; vector: Triton {CHAINS} FMA chains x "
              f"{plan.vector_iters} iterations over {plan.vector_elems} elements; CUDA events after {plan.warmup} "
              f"warm-up calls")
    return Ceilings(device=props.name, driver=driver if driver is not None else driver_version(),
                    torch=torch.__version__, cuda=str(torch.version.cuda or ""), copy_gbps=copy,
                    matrix_tflops=matrix, vector_tflops=vector, method=method, measured_at=time.time())


def get_ceilings(path: str | os.PathLike | None = None, *, plan: CeilingPlan = CeilingPlan(),
                 measure: Callable[[CeilingPlan], Ceilings] = measure_ceilings) -> Ceilings:
    """The current device's ceilings: from the cache when its key matches, else measured once and stored."""
    import torch

    from ...core.device import driver_version
    name = torch.cuda.get_device_properties(0).name
    hit = cached_ceilings(name, driver_version(), torch.__version__, path)
    if hit is not None:
        return hit
    fresh = measure(plan)
    store_ceilings(fresh, path)
    return fresh


__all__ = ["CACHE_FORMAT", "CACHE_VERSION", "CeilingPlan", "CeilingsCacheError", "cache_path", "cached_ceilings",
           "get_ceilings", "load_cache", "measure_ceilings", "measure_copy_gbps", "measure_matrix_tflops",
           "measure_vector_tflops", "store_ceilings"]

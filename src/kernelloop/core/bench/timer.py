"""Sampling of kernel time and call time for several subjects, interleaved in random order.

Runs inside the worker process (it has to call the subjects). Each round visits every subject once, in a
fresh random order; a round takes, per subject:
- kernel time: flush L2, sleep on the device, event, call, event  (launch hidden, cold L2);
- call time:   flush L2, synchronize, event, call, event        (host launch overhead included).
"""

from __future__ import annotations

import contextlib
import random
import time
from typing import Callable

import torch

from ...base.records import TimingPolicy

Hook = Callable[[str], None] | None


class _Flush:
    """Evicts the L2 before a sample: zero the buffer ('write': the L2 is left holding dirty lines that the next
    kernel's misses write back) or reduce over it ('read': the L2 is left holding clean lines)."""

    def __init__(self, nbytes: int, mode: str, device: str = "cuda"):
        self.buf = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        self.mode = mode
        self.sink = torch.zeros((), dtype=torch.int64, device=device)

    def __call__(self) -> None:
        if self.mode == "read":
            torch.sum(self.buf, dim=0, dtype=torch.int64, out=self.sink)  # torch 2.11 has no out= without dim
        else:
            self.buf.zero_()


def _time_cuda(subjects: dict[str, Callable[[], object]], policy: TimingPolicy, seed: int,
               before: Hook = None, after: Hook = None, prepare: Hook = None) -> dict:
    names = list(subjects)
    flush = _Flush(policy.flush_bytes, policy.flush_mode) if policy.flush_bytes else None
    for name in names:
        for _ in range(policy.warmup):
            if prepare:
                prepare(name)
            subjects[name]()
    torch.cuda.synchronize()
    rng = random.Random(seed)
    n = policy.samples
    ev = {name: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(2 * n)]
          for name in names}
    sleep = policy.sleep_cycles
    exposed = {name: 0 for name in names}
    kept_exposed = {name: 0 for name in names}
    for i in range(n):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            fn = subjects[name]
            for attempt in range(LAUNCH_RETRIES + 1):
                if before:
                    before(name)
                if flush is not None:
                    flush()
                if sleep:
                    torch.cuda._sleep(sleep)
                a, b = ev[name][2 * i]
                a.record()
                fn()
                b.record()
                # Asked once the end event is queued: a sleep that ended before then left the device idle
                # before the call started or before the end event arrived.
                exposed_now = bool(sleep) and launch_exposed(a)
                if after:
                    after(name)
                if not exposed_now:
                    break
                if attempt == LAUNCH_RETRIES:
                    kept_exposed[name] += 1  # the last attempt stands, counted as such
                    break
                # The device had finished the sleep before the host had launched the call: the interval holds
                # host launch time. Count it, sleep longer from now on, and take the sample again.
                exposed[name] += 1
                sleep = min(2 * sleep, MAX_SLEEP_CYCLES)
            if before:
                before(name)
            if flush is not None:
                flush()
            torch.cuda.synchronize()
            a, b = ev[name][2 * i + 1]
            a.record()
            fn()
            b.record()
            if after:
                after(name)
    torch.cuda.synchronize()
    out = {}
    for name in names:
        kernel = [ev[name][2 * i][0].elapsed_time(ev[name][2 * i][1]) * 1e3 for i in range(n)]
        call = [ev[name][2 * i + 1][0].elapsed_time(ev[name][2 * i + 1][1]) * 1e3 for i in range(n)]
        out[name] = {"kernel_us": kernel, "call_us": call,
                     "audit": _audit_batch(subjects[name], AUDIT_BATCH, (lambda n=name: prepare(n)) if prepare else None),
                     "launch": {"exposed_retakes": exposed[name], "kept_exposed": kept_exposed[name],
                                "sleep_cycles_final": sleep}}
    return out


AUDIT_BATCH = 20
LAUNCH_RETRIES = 3                 # re-takes of one kernel-time sample whose launch was not hidden
MAX_SLEEP_CYCLES = 64_000_000      # ~32 ms at 2 GHz: the longest device sleep the timer escalates to


def launch_exposed(start_event) -> bool:
    """True when the start event, recorded right after the device-side sleep, has already completed once the host
    has launched the call and queued the end event: the device may have gone idle before the call or the end
    event arrived, so host time may be in the sample. While the sleep still runs, the event is pending and the
    call and end event are queued behind it (launch hidden)."""
    return bool(start_event.query())


def _audit_batch(fn: Callable[[], object], batch: int, prepare: Callable[[], None] | None = None) -> dict:
    """Events on the harness stream versus wall-clock up to a device-wide synchronize, over a batch of calls.

    Work the call leaves on other streams is not bracketed by the harness events but is waited for by the
    device-wide synchronize: when it outlasts the host's launch time it shows up as wall >> events. `prepare`
    runs before each call inside the bracket (it adds the same time to both sides).
    """
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    a.record()
    for _ in range(batch):
        if prepare:
            prepare()
        fn()
    b.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e6
    return {"batch": batch, "events_us": a.elapsed_time(b) * 1e3, "wall_us": wall}


def _time_wallclock(subjects: dict[str, Callable[[], object]], policy: TimingPolicy, seed: int,
                    before: Hook = None, after: Hook = None, prepare: Hook = None) -> dict:
    names = list(subjects)
    for name in names:
        for _ in range(policy.warmup):
            if prepare:
                prepare(name)
            subjects[name]()
    rng = random.Random(seed)
    out = {name: {"kernel_us": [], "call_us": []} for name in names}
    for _ in range(policy.samples):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            if before:
                before(name)
            t0 = time.perf_counter()
            subjects[name]()
            dt = (time.perf_counter() - t0) * 1e6
            if after:
                after(name)
            # In the interpreter there is no device: kernel time and call time are the same wall-clock.
            out[name]["kernel_us"].append(dt)
            out[name]["call_us"].append(dt)
    return out


def sample(subjects: dict[str, Callable[[], object]], policy: TimingPolicy, seed: int,
           before: Hook = None, after: Hook = None, prepare: Hook = None) -> dict:
    """{subject: {"kernel_us": [...], "call_us": [...]}} with `policy.samples` samples each.

    `before(name)` runs outside the timed region ahead of every timed call (the harness refreshes the inputs
    there, so results cached by pointer, id or content cannot pay); `after(name)` runs after each timed call's
    end event is recorded (the harness snapshots outputs of sampled calls there for re-verification);
    `prepare(name)` runs before every untimed call (warm-up, and each call of the launch audit's batch): the
    harness poisons the candidates' workspaces there, as `before` does for timed calls.
    """
    if policy.clock == "cuda-events":
        return _time_cuda(subjects, policy, seed, before, after, prepare)
    return _time_wallclock(subjects, policy, seed, before, after, prepare)


def nvml_handle(pynvml):
    """The NVML handle of this process's current CUDA device. NVML numbers every GPU of the host and ignores
    CUDA_VISIBLE_DEVICES, so a worker that sees one GPU of several (`--devices`) finds its own by UUID; index 0 only
    where NVML sees a single GPU. Raises where neither tells which GPU it is."""
    import torch
    uuid = str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", "") or "")
    # torch writes the UUID without NVML's prefix, which is GPU- for a whole GPU and MIG- for a MIG slice
    texts = [uuid] if uuid.startswith(("GPU-", "MIG-")) else [f"GPU-{uuid}", f"MIG-{uuid}"] if uuid else []
    for text in texts:
        for arg in (text, text.encode()):   # older bindings take bytes
            with contextlib.suppress(Exception):   # not this form of the UUID: try the next
                return pynvml.nvmlDeviceGetHandleByUUID(arg)
    if pynvml.nvmlDeviceGetCount() == 1:
        return pynvml.nvmlDeviceGetHandleByIndex(0)
    raise RuntimeError(f"NVML has no GPU of this process's UUID {uuid!r} among {pynvml.nvmlDeviceGetCount()}")


def gpu_snapshot() -> dict:
    """Clocks, temperature and throttle reasons of this process's GPU through NVML when available (never changes
    settings)."""
    try:
        import pynvml  # provided by nvidia-ml-py
        pynvml.nvmlInit()
        h = nvml_handle(pynvml)
        snap = {
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        }
        pynvml.nvmlShutdown()
        return snap
    except Exception as e:  # noqa: BLE001 - NVML absent or refused: record why, never fail timing for it
        return {"nvml": f"unavailable: {type(e).__name__}: {e}"[:200]}

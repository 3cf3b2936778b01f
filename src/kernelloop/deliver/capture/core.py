"""`capture(model, example_inputs)`: run the model once and turn what it called into operator cards.

The model runs once under torch.no_grad() with the Recorder (trace.py) attached. With profile (default: on when the
inputs are on CUDA) it first runs one warm-up forward without recording (lazy initialisation, autotuning and
allocator growth stay out of the numbers), then the recorded forward under torch.profiler (CPU + CUDA activities):
each ATen call's device time is the time of the device events (kernels, copies) launched inside its `kl#<seq>`
range, and the model's device time is the sum of every device event of that forward except the mapping's own checks
(_device_times). On CPU, device_time_us and share stay None.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from .mapping import OpSpecs, default_ops_root
from .records import AtenVariant, CaptureReport, CensusEntry, OperatorCard, TensorInfo
from .trace import CHECK_RANGE, PROFILE_PREFIX, AtenCall, Recorder, json_value, qualname, tensor_info


class CaptureError(RuntimeError):
    """The model raised while being captured: the model class, the module path being run and the original error."""

    def __init__(self, model_class: str, module_path: str | None, error: BaseException):
        self.model_class, self.module_path, self.error = model_class, module_path, error
        where = "the model's own forward" if not module_path else f"module {module_path!r}"
        super().__init__(f"{model_class} raised in {where}: {type(error).__name__}: {error}")


def _split_inputs(example_inputs: Any) -> tuple[tuple, dict]:
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def _device_of(model: torch.nn.Module, args: tuple, kwargs: dict) -> torch.device:
    for v in [*args, *kwargs.values()]:
        if isinstance(v, torch.Tensor):
            return v.device
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def capture(model: torch.nn.Module, example_inputs: Any, *, profile: bool | None = None,
            ops_root: str | Path | None = None) -> CaptureReport:
    """Run `model(*example_inputs)` (a tuple/list: positional; a dict: keywords; anything else: one argument) once
    and return its cards, census and, with profile, device times. Raises CaptureError when the model raises (no
    report is returned then), ValueError for profile=True without CUDA inputs."""
    args, kwargs = _split_inputs(example_inputs)
    device = _device_of(model, args, kwargs)
    if profile is None:
        profile = device.type == "cuda"
    if profile and device.type != "cuda":
        raise ValueError(f"profile needs CUDA inputs (these are on {device})")
    specs = OpSpecs(ops_root if ops_root is not None else default_ops_root())
    model_class = qualname(type(model))
    recorder = Recorder(specs, profiling=profile)
    prof = None
    with torch.no_grad():
        if profile:  # the warm-up: hooks only (they know the module path should it raise), no ATen recording
            warm = Recorder(specs)
            warm.attach(model)
            try:
                model(*args, **kwargs)
                torch.cuda.synchronize(device)
            except Exception as e:  # noqa: BLE001 - any model error becomes a CaptureError naming the module
                raise CaptureError(model_class, warm.current_path, e) from e
            finally:
                warm.detach()
        recorder.attach(model)
        try:
            if profile:
                from torch.profiler import ProfilerActivity
                with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    with recorder.mode():
                        model(*args, **kwargs)
                    torch.cuda.synchronize(device)
            else:
                with recorder.mode():
                    model(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any model error becomes a CaptureError naming the module
            raise CaptureError(model_class, recorder.current_path, e) from e
        finally:
            recorder.detach()
    times, total = _device_times(prof) if prof is not None else (None, None)
    names = [str(i) for i in range(len(args))] + list(kwargs)
    tensors = [*args, *kwargs.values()]
    inputs = {n: tensor_info(t) for n, t in zip(names, tensors) if isinstance(t, torch.Tensor)}
    cards = _cards(recorder, times, total)
    return CaptureReport(
        model_class=model_class, device=str(device),
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        torch_version=torch.__version__, inputs=inputs, profiled=bool(profile), device_time_us=total,
        aten_calls=len(recorder.calls), cards=cards, census=_census(recorder, times, total))


def _device_times(prof) -> tuple[dict[int, float], float]:
    """Device time per recorded call and of the whole profiled forward, in microseconds.

    The profiler projects each record_function range onto the GPU timeline (a user-annotation device event spanning
    the kernels launched inside it). Every device event that is not such a projection (a kernel, copy or memset) is
    counted once: it goes to the kl#<seq> range whose projection contains it, or out of the total when it lies in a
    kl-mapping range (the mapping's own checks); one in no range stays in the total only."""
    import bisect

    from torch.autograd import DeviceType
    ranges, work = [], []
    for e in prof.events():
        if e.device_type != DeviceType.CUDA:
            continue
        t = e.time_range
        if e.name.startswith(PROFILE_PREFIX) or e.name == CHECK_RANGE:
            ranges.append((t.start, t.end, e.name))
        elif not getattr(e, "is_user_annotation", False):
            work.append((t.start, t.end))
    ranges.sort()
    starts = [r[0] for r in ranges]
    times: dict[int, float] = {}
    total = 0.0
    for begin, end in work:
        i = bisect.bisect_right(starts, begin) - 1
        name = ranges[i][2] if i >= 0 and end <= ranges[i][1] else None
        if name == CHECK_RANGE:
            continue
        total += end - begin
        if name is not None:
            seq = int(name[len(PROFILE_PREFIX):])
            times[seq] = times.get(seq, 0.0) + (end - begin)
    return times, total


def _sum_time(calls: list[AtenCall], times: dict[int, float] | None) -> float | None:
    return None if times is None else sum(times.get(c.seq, 0.0) for c in calls)


def _share(t: float | None, total: float | None) -> float | None:
    return None if t is None or not total else t / total


def _variants(calls: list[AtenCall], times: dict[int, float] | None) -> list[AtenVariant]:
    """The distinct variants of these calls, in order of first call, with counts and summed times."""
    groups: dict[tuple, list[AtenCall]] = {}
    for c in calls:
        groups.setdefault(c.key, []).append(c)
    return [AtenVariant(overload=k[0], tensors=list(k[1]), args=json.loads(k[2]), count=len(g),
                        device_time_us=_sum_time(g, times)) for k, g in groups.items()]


def _cards(rec: Recorder, times: dict[int, float] | None, total: float | None) -> list[OperatorCard]:
    """Group module calls (by class, inputs, ATen variants, mapping) and recognised ATen calls (by innermost
    module class, variant, mapping) into cards, in order of first call."""
    sites: dict[tuple, dict] = {}
    order: list[tuple[int, tuple]] = []
    for m in rec.modules:
        if m.mapping is None:  # a recognised module that never returned (cannot happen after a clean forward)
            continue
        own = [rec.calls[s] for s in m.calls]
        shape = tuple(sorted((c.key for c in own), key=repr))
        key = ("module", m.module_class, m.inputs, shape, m.mapping.key)
        first_seq = own[0].seq if own else len(rec.calls)
        site = sites.get(key)
        if site is None:
            site = sites[key] = {"kind": "module", "cls": m.module_class, "paths": [], "calls": 0, "own": [],
                                 "inputs": m.inputs, "mapping": m.mapping, "overload": None}
            order.append((first_seq, key))
        site["calls"] += 1
        site["own"] += own
        if m.path not in site["paths"]:
            site["paths"].append(m.path)
    for c in rec.calls:
        if c.owner is not None or c.mapping is None:
            continue
        key = ("aten", c.frame_class, c.key, c.mapping.key)
        site = sites.get(key)
        if site is None:
            site = sites[key] = {"kind": "aten", "cls": c.frame_class or "(none)", "paths": [], "calls": 0,
                                 "own": [], "inputs": c.tensors, "mapping": c.mapping, "overload": c.overload}
            order.append((c.seq, key))
        site["calls"] += 1
        site["own"].append(c)
        if c.frame_path not in site["paths"]:
            site["paths"].append(c.frame_path)
    cards = []
    for _, key in sorted(order, key=lambda x: x[0]):
        s = sites[key]
        mp = s["mapping"]
        t = _sum_time(s["own"], times)
        cards.append(OperatorCard(
            kind=s["kind"], module_class=s["cls"], paths=s["paths"], calls=s["calls"], overload=s["overload"],
            inputs=list(s["inputs"]), aten=_variants(s["own"], times), params=_jsonable(mp.params),
            target=mp.target, op=mp.op, axes=mp.axes, dtype=mp.dtype, reason=mp.reason,
            device_time_us=t, share=_share(t, total)))
    return cards


def _jsonable(params: dict) -> dict:
    return {k: json_value(v) for k, v in params.items()}


def _covered(rec: Recorder) -> set[int]:
    """Sequence numbers of the ATen calls inside mapped cards."""
    seqs = {c.seq for c in rec.calls if c.owner is None and c.mapping is not None and c.mapping.op is not None}
    for m in rec.modules:
        if m.mapping is not None and m.mapping.op is not None:
            seqs.update(m.calls)
    return seqs


def _census(rec: Recorder, times: dict[int, float] | None, total: float | None) -> list[CensusEntry]:
    """Every ATen overload's calls outside mapped cards: by device time when measured, else by count; views last."""
    covered = _covered(rec)
    by_overload: dict[str, list[AtenCall]] = defaultdict(list)
    for c in rec.calls:
        if c.seq not in covered:
            by_overload[c.overload].append(c)
    entries = []
    for overload, calls in by_overload.items():
        t = _sum_time(calls, times)
        variants = _variants(calls, times)
        variants.sort(key=lambda v: (-(v.device_time_us or 0.0), -v.count))
        classes = list(dict.fromkeys(c.frame_class or "(none)" for c in calls))
        entries.append(CensusEntry(overload=overload, view=calls[0].view, count=len(calls), device_time_us=t,
                                   share=_share(t, total), module_classes=classes, variants=variants))
    entries.sort(key=lambda e: (e.view, -(e.device_time_us or 0.0), -e.count, e.overload))
    return entries

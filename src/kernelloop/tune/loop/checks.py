"""The checks of a run's options that need its op and workloads (`RunOptions` runs them in its validators when
validated with `context={"bundle": ..., "workloads": ...}`; `kernelloop.tune.loop.run` always does). Each raises
`UsageError` naming the setting as the caller names it (`names`: the API's keywords by default, the CLI's flags
from `kernelloop optimize`)."""

from __future__ import annotations

from typing import Mapping, Sequence

from ...base.records import Workload
from ...base.usage import UsageError

API_NAMES = {"templates": "template", "baselines": "baseline", "fixed": "fixed", "start": "start", "prior": "prior",
             "strategy": "strategy", "screen_samples": "screen_samples", "profile_timeout_s": "profile_timeout_s",
             "devices": "devices", "executor": "executor", "gpu_seconds": "gpu_seconds", "budget": "budget",
             "resume": "resume=True", "out": "out=RUN_DIR"}
CLI_NAMES = {"templates": "--template", "baselines": "--baseline", "fixed": "--fix", "start": "--start",
             "prior": "--prior", "strategy": "--strategy", "screen_samples": "--screen",
             "profile_timeout_s": "--profile-timeout", "devices": "--devices", "executor": "--executor",
             "gpu_seconds": "--gpu-budget", "budget": "--budget", "resume": "--resume", "out": "--out RUN_DIR"}


def name(names: Mapping[str, str] | None, field: str) -> str:
    """How the caller names a setting in its messages."""
    return (names or API_NAMES).get(field, field)


def check_templates(templates: Sequence[str] | None, bundle, names=None) -> None:
    known = [t.name for t in bundle.spec.templates]
    for t in templates or ():
        if t not in known:
            raise UsageError(f"{name(names, 'templates')} {t!r}: {bundle.spec.name} has {', '.join(known)}")


def check_baselines(baselines: Sequence[str] | None, bundle, names=None) -> None:
    from ...core.execute.baselines import BUILTIN_BASELINES
    from .winners import op_baseline_names
    known = [*BUILTIN_BASELINES, *op_baseline_names(bundle)]
    for b in baselines or ():
        if b not in known:
            raise UsageError(f"{name(names, 'baselines')} {b!r}: choose from {', '.join(known)}")


def check_fixed(fixed: Mapping[str, str] | None, bundle, templates: Sequence[str] | None = None, names=None) -> None:
    """Some (selected) template of the op has every pinned parameter with its value."""
    if fixed is None:
        return
    for t in bundle.spec.templates:
        if templates and t.name not in templates:
            continue
        declared = {p.name: [str(v).lower() for v in p.values] for p in t.params}
        if all(k in declared and str(v).lower() in declared[k] for k, v in fixed.items()):
            return
    raise UsageError(f"{name(names, 'fixed')} {dict(fixed)!r}: no template of {bundle.spec.name} has these "
                     f"parameters with these values")


def check_start(start: Mapping[str, str] | None, bundle, workloads: Sequence[Workload], device: str,
                names=None) -> None:
    """The planner's first configuration is in every workload's pruned space."""
    if start is None:
        return
    from ...core.device import device_properties
    from ...core.spec.start import StartError, resolve_start
    try:
        resolve_start(bundle.spec, list(workloads), dict(start), device_properties(device))
    except StartError as e:
        raise UsageError(str(e).replace("--start", name(names, "start"))) from None


def empty_spaces(bundle, workloads: Sequence[Workload], device: str, templates: Sequence[str] | None = None,
                 fixed: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each workload left with nothing to try on this device once the (selected, pinned) templates are pruned,
    with why: {workload label: the most common pruning reasons}."""
    from ...core.device import device_properties
    from ...core.spec.space import selected_space
    props = device_properties(device)
    empty = {}
    for w in workloads:
        parts = selected_space(bundle.spec.templates, w, props, list(templates) if templates else None,
                               dict(fixed) if fixed else None)
        if not any(kept for _, kept, _ in parts):
            why = [f"{t.name}: " + "; ".join(f"{reason} ({n} of {report.total})"
                                             for reason, n in report.reasons.most_common(2))
                   if report.reasons else f"{t.name}: no configuration has the pinned values"
                   for t, _, report in parts] or ["no selected template has every pinned parameter"]
            empty[w.label] = " | ".join(why)
    return empty


def check_space(bundle, workloads: Sequence[Workload], device: str, templates: Sequence[str] | None = None,
                fixed: Mapping[str, str] | None = None) -> dict[str, str]:
    """`empty_spaces`; UsageError when that is every workload (the run would evaluate nothing)."""
    empty = empty_spaces(bundle, workloads, device, templates, fixed)
    if empty and len(empty) == len(workloads):
        first = next(iter(empty.values()))
        raise UsageError(f"nothing to try on {device}: every configuration of every workload is pruned ({first})")
    return empty


def check_ray(executor: str) -> None:
    """The 'ray' executor needs the cluster extra: refused with the reason when Ray does not import."""
    if executor == "ray":
        from ...core.execute.ray_executor import ray_available
        why = ray_available()
        if why:
            raise UsageError(f"executor 'ray': {why}")


__all__ = ["API_NAMES", "CLI_NAMES", "check_baselines", "check_fixed", "check_ray", "check_space", "check_start",
           "check_templates", "empty_spaces", "name"]

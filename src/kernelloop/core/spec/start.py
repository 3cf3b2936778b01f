"""A start configuration (`kernelloop optimize --start "BLOCK_N=1024,ROWS=1,num_warps=1"`): parsed, then
resolved to one configuration of each workload's pruned space, or refused with a message naming the parameter,
the value or the rule that removes it.

A start may name every parameter of a template or only some: the parameters it does not name take their first
value (declaration order) among the pruned space's configurations that agree with the named ones. `template=NAME`
picks the template when an op has several; otherwise the first template that has every named parameter is used.
"""

from __future__ import annotations

from collections import Counter

from ...base.records import OpSpec, TemplateSpec, Workload
from ...base.records.device import DeviceProperties
from .space import expand, prune, why_pruned


class StartError(ValueError):
    """A start configuration that is malformed, names an unknown parameter or value, or is pruned."""


def parse_assignments(text: str) -> dict[str, str]:
    """'K=V,K=V' -> {K: V} (values as text, matched against the declared values later)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise StartError(f"--start item {part!r}: expected NAME=VALUE (e.g. 'BLOCK_N=1024,num_warps=4')")
        if key in out:
            raise StartError(f"--start names {key!r} twice")
        out[key] = value
    if not out:
        raise StartError("--start is empty; expected NAME=VALUE items separated by commas")
    return out


def _declared(template: TemplateSpec, name: str, text: str):
    """The declared value of parameter `name` whose text form is `text` (case-insensitive), or StartError."""
    values = next(p.values for p in template.params if p.name == name)
    for v in values:
        if str(v).lower() == text.lower():
            return v
    raise StartError(f"--start {name}={text}: {text!r} is not a value of {name} in template {template.name!r} "
                     f"(declared values: {values})")


def _template(spec: OpSpec, wanted: dict[str, str]) -> TemplateSpec:
    names = {k for k in wanted if k != "template"}
    if "template" in wanted:
        t = next((t for t in spec.templates if t.name == wanted["template"]), None)
        if t is None:
            raise StartError(f"--start template={wanted['template']}: op {spec.name!r} has no such template "
                             f"(templates: {[t.name for t in spec.templates]})")
        candidates = [t]
    else:
        candidates = list(spec.templates)
    for t in candidates:
        params = {p.name for p in t.params}
        if names <= params:
            return t
    t = candidates[0]
    unknown = sorted(names - {p.name for p in t.params})
    raise StartError(f"--start names unknown parameter(s) {unknown}; parameters of template {t.name!r}: "
                     f"{[p.name for p in t.params]}")


def resolve_start(spec: OpSpec, workloads: list[Workload], start: dict[str, str], props: DeviceProperties) -> dict[str, dict]:
    """{workload id: configuration (with its 'template' key)} for a start; StartError when a workload's pruned
    space has no configuration that agrees with it."""
    template = _template(spec, start)
    fixed = {k: _declared(template, k, v) for k, v in start.items() if k != "template"}
    matching = [c for c in expand(template) if all(c[k] == v for k, v in fixed.items())]
    shown = ",".join(f"{k}={v}" for k, v in fixed.items())
    out: dict[str, dict] = {}
    for w in workloads:
        kept, _ = prune(template, w, props)
        hit = next((c for c in kept if all(c[k] == v for k, v in fixed.items())), None)
        if hit is None:
            if len(matching) == 1:
                full = ", ".join(f"{k}={v}" for k, v in matching[0].items())
                why = f"{full} is removed by {why_pruned(template, w, props, matching[0])}"
            else:
                reasons = Counter(why_pruned(template, w, props, c) for c in matching)
                why = f"all {len(matching)} configurations with it are removed: " + "; ".join(
                    f"{r} ({n})" for r, n in reasons.most_common())
            raise StartError(f"--start {shown} is not in the pruned space of workload {w.label}: {why}")
        out[w.id] = {"template": template.name, **hit}
    return out


__all__ = ["StartError", "parse_assignments", "resolve_start"]

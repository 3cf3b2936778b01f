"""Configuration spaces: expansion of a template's declared space, and pruning before compiling.

Two layers run before anything is compiled:
- semantic: the template's own constraints (e.g. a block must cover or tile the row);
- hardware: the device's limits (threads per block, registers per thread and per SM, shared memory).
Every pruned configuration is counted under the rule that removed it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

from ...base.records import TemplateSpec, Workload, evaluate_expression
from ...base.records.device import DeviceProperties


@dataclass
class PruneReport:
    """What pruning kept and why the rest went."""

    total: int = 0
    kept: int = 0
    reasons: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {"total": self.total, "kept": self.kept, "pruned": self.total - self.kept,
                "reasons": dict(self.reasons.most_common())}


def expand(template: TemplateSpec) -> list[dict]:
    """Every combination of the declared parameter values, in declaration order."""
    names = [p.name for p in template.params]
    return [dict(zip(names, combo)) for combo in itertools.product(*(p.values for p in template.params))]


def hardware_violation(template: TemplateSpec, config: dict, names: dict, props: DeviceProperties) -> str | None:
    """The first device limit a configuration breaks, or None."""
    env = {**names, **config}
    r = template.resources
    threads = evaluate_expression(r.threads, env)
    regs = evaluate_expression(r.regs_per_thread, env)
    smem = evaluate_expression(r.shared_bytes, env)
    if threads > props.max_threads_per_block:
        return f"threads per program > {props.max_threads_per_block}"
    if regs > props.max_regs_per_thread:
        return f"estimated registers per thread > {props.max_regs_per_thread} (would spill)"
    if regs * threads > props.regs_per_sm:
        return f"registers per program > {props.regs_per_sm} per SM"
    if smem > props.shared_per_block_optin:
        return f"shared memory per program > {props.shared_per_block_optin} bytes"
    return None


def workload_names(workload: Workload, props: DeviceProperties) -> dict:
    """The names constraints and resource formulas may use besides the configuration's parameters."""
    return {**workload.axes, "elem": workload.dtype.itemsize,
            # device facts constraints may use, e.g. "TMA == 0 or (cc_major >= 9 and not interpreter)"
            "cc_major": props.capability[0], "sm_count": props.sm_count, "interpreter": props.virtual}


def _violation(template: TemplateSpec, config: dict, names: dict, props: DeviceProperties) -> str | None:
    """'semantic: REASON' or 'hardware: LIMIT' for the first rule a configuration breaks, or None."""
    env = {**names, **config}
    failed = next((c for c in template.constraints if not evaluate_expression(c.expr, env)), None)
    if failed is not None:
        return f"semantic: {failed.reason}"
    hw = hardware_violation(template, config, names, props)
    return None if hw is None else f"hardware: {hw}"


def why_pruned(template: TemplateSpec, workload: Workload, props: DeviceProperties, config: dict) -> str | None:
    """Why pruning removes `config` for `workload` on `props` (the constraint's expression and reason, or the
    device limit), or None when pruning keeps it."""
    names = workload_names(workload, props)
    env = {**names, **config}
    failed = next((c for c in template.constraints if not evaluate_expression(c.expr, env)), None)
    if failed is not None:
        return f"constraint '{failed.expr}' ({failed.reason})"
    hw = hardware_violation(template, config, names, props)
    return None if hw is None else f"device limit: {hw}"


def prune(template: TemplateSpec, workload: Workload, props: DeviceProperties) -> tuple[list[dict], PruneReport]:
    """Configurations of `template` that can launch on `props` and satisfy its constraints for `workload`."""
    names = workload_names(workload, props)
    report = PruneReport()
    kept = []
    for config in expand(template):
        report.total += 1
        why = _violation(template, config, names, props)
        if why is not None:
            report.reasons[why] += 1
            continue
        kept.append(config)
    report.kept = len(kept)
    return kept, report


def selected_space(templates: list[TemplateSpec], workload: Workload, props: DeviceProperties, names: list[str] | None = None,
                   fixed: dict[str, str] | None = None) -> list[tuple[TemplateSpec, list[dict], PruneReport]]:
    """The space a run searches (`optimize`) or records (`record`) for `workload`: per template in spec order,
    its pruned configurations (each with a "template" key), restricted to the templates in `names` and, with
    `fixed` (parameter: value text, compared case-insensitively as text), to the templates that have every pinned
    parameter and the configurations with those values; with the template's prune report."""
    out = []
    for t in templates:
        if names is not None and t.name not in names:
            continue
        if fixed and not set(fixed) <= {p.name for p in t.params}:
            continue
        kept, report = prune(t, workload, props)
        if fixed:
            kept = [c for c in kept if all(str(c[k]).lower() == str(v).lower() for k, v in fixed.items())]
        out.append((t, [{"template": t.name, **c} for c in kept], report))
    return out

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

from ..records import TemplateSpec, Workload, evaluate_expression


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


def hardware_violation(template: TemplateSpec, config: dict, names: dict, props: dict) -> str | None:
    """The first device limit a configuration breaks, or None."""
    env = {**names, **config}
    r = template.resources
    threads = evaluate_expression(r.threads, env)
    regs = evaluate_expression(r.regs_per_thread, env)
    smem = evaluate_expression(r.shared_bytes, env)
    if threads > props["max_threads_per_block"]:
        return f"threads per program > {props['max_threads_per_block']}"
    if regs > props["max_regs_per_thread"]:
        return f"estimated registers per thread > {props['max_regs_per_thread']} (would spill)"
    if regs * threads > props["regs_per_sm"]:
        return f"registers per program > {props['regs_per_sm']} per SM"
    if smem > props["shared_per_block_optin"]:
        return f"shared memory per program > {props['shared_per_block_optin']} bytes"
    return None


def prune(template: TemplateSpec, workload: Workload, props: dict) -> tuple[list[dict], PruneReport]:
    """Configurations of `template` that can launch on `props` and satisfy its constraints for `workload`."""
    names = {**workload.axes, "elem": workload.dtype.itemsize,
             # device facts constraints may use, e.g. "TMA == 0 or (cc_major >= 9 and not interpreter)"
             "cc_major": props.get("capability", [0, 0])[0], "sm_count": props.get("sm_count", 0),
             "interpreter": bool(props.get("virtual", False))}
    report = PruneReport()
    kept = []
    for config in expand(template):
        report.total += 1
        env = {**names, **config}
        failed = next((c for c in template.constraints if not evaluate_expression(c.expr, env)), None)
        if failed is not None:
            report.reasons[f"semantic: {failed.reason}"] += 1
            continue
        hw = hardware_violation(template, config, names, props)
        if hw is not None:
            report.reasons[f"hardware: {hw}"] += 1
            continue
        kept.append(config)
    report.kept = len(kept)
    return kept, report

"""The static gate: a candidate and its ahead-of-time sm_90 build, checked before anything reaches a GPU.

    decision = gate(candidate, outcome, workload=w)              # outcome: kernelloop.core.build.aot.BuildOutcome
    decision = gate_candidate(candidate, spec, w)                # builds it ahead of time first (seconds)

For a candidate lowered from a schedule (its source carries `SCHEDULE`; the config binds the numbers), the schedule
is checked first: it must lower, its barrier protocol must hold on every interleaving (kernelloop.tune.schedule.protocol)
and its footprint must fit the device (kernelloop.tune.schedule.resources). Then, for every candidate — schedule, Triton
or Gluon source — the build: it must have compiled; each kernel's shared memory and threads within the device's
limits, its registers over its threads within the register file, at least `budget.ctas_per_sm` programs an SM; and
within the candidate's declared budget (a schedule's: the registers it is built with, no spills, its shared-memory
footprint). Every finding names the schedule field to change. The decision is a record, archived so the gate's
precision can be measured against GPU verdicts (kernelloop.tune.gate.archive).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...base.records.device import DeviceProperties
from ...core.device import VIRTUAL_HOPPER
from ...base.records import Candidate, OpSpec, Workload
from ..schedule.lower import NotLowerable, lower, schedule_of
from ..schedule.protocol import check_protocol
from ..schedule.records import Schedule
from ..schedule.resources import check_resources, footprint
from ...base.records.gate import Budget, GateDecision, GateFinding, GateResources

HOPPER = VIRTUAL_HOPPER.with_(virtual=False, name="sm_90")


def check_schedule(schedule: Schedule, elem: int = 2, limits: DeviceProperties | None = None) -> list[GateFinding]:
    """The schedule's own findings (no build): lowering, barrier protocol, footprint."""
    try:
        lower(schedule)
    except NotLowerable as e:
        return [GateFinding(check="lowering", field=e.field, message=str(e).split(": ", 1)[1])]
    out = [GateFinding(check="protocol", field=f.field, message=f.message) for f in check_protocol(schedule)]
    out += [GateFinding(check="resources", field=f.field, message=f.message)
            for f in check_resources(schedule, elem, limits)]
    return out


def schedule_budget(schedule: Schedule, elem: int = 2, limits: DeviceProperties | None = None) -> Budget:
    """What a schedule declares: built at its maxnreg, no spills, within its shared-memory footprint."""
    math = schedule.role_index(schedule.math_roles[0].name)
    return Budget(registers=schedule.max_registers, shared_bytes=footprint(schedule, elem, limits).shared_bytes,
                  spills=False, field=f"roles[{math}].registers")


def _ctas(kernel: dict, limits: DeviceProperties) -> int | None:
    threads = (kernel.get("num_warps") or 0) * 32
    if not threads or kernel.get("REG") is None or kernel.get("shared") is None:
        return None
    return min(limits.regs_per_sm // max(kernel["REG"] * threads, 1),
               limits.shared_per_sm // (kernel["shared"] + 1024), limits.max_threads_per_sm // threads)


def check_build(outcome, limits: DeviceProperties, budget: Budget | None) -> tuple[list[GateFinding], GateResources]:
    """The build's findings against the device and the budget, and its resources."""
    from ...core.build.aot import BUILT
    if outcome.status != BUILT:
        return [GateFinding(check="build", message=f"{outcome.status}: {outcome.error[:1500]}")], GateResources()
    out: list[GateFinding] = []
    b = budget or Budget()
    for k in outcome.kernels:
        name, threads, regs = k.get("name", "?"), (k.get("num_warps") or 0) * 32, k.get("REG")
        shared = k.get("shared")
        if shared is not None and shared > limits.shared_per_block_optin:
            out.append(GateFinding(check="shared", field="ring.stages" if b.field else "",
                                   message=f"{name}: {shared} bytes of shared memory > "
                                           f"{limits.shared_per_block_optin}"))
        elif shared is not None and b.shared_bytes is not None and shared > b.shared_bytes:
            out.append(GateFinding(check="shared", field="ring.stages" if b.field else "",
                                   message=f"{name}: built with {shared} bytes of shared memory, more than the "
                                           f"{b.shared_bytes} declared"))
        if threads > limits.max_threads_per_block:
            out.append(GateFinding(check="threads", message=f"{name}: {threads} threads > "
                                                            f"{limits.max_threads_per_block}"))
        if regs is not None and regs * threads > limits.regs_per_sm:
            out.append(GateFinding(check="registers", field=b.field, message=f"{name}: {regs} registers x {threads} "
                                                                             f"threads > {limits.regs_per_sm}"))
        elif regs is not None and b.registers is not None and regs > b.registers:
            out.append(GateFinding(check="registers", field=b.field, message=f"{name}: {regs} registers a thread > "
                                                                             f"the {b.registers} declared"))
        if not b.spills and ((k.get("LOCAL") or 0) > 0 or (k.get("STACK") or 0) > 0):
            out.append(GateFinding(check="spills", field=b.field, message=f"{name}: spills ({k.get('LOCAL')} bytes "
                                                                          f"of local memory a thread) where none "
                                                                          f"are allowed"))
        ctas = _ctas(k, limits)
        if ctas is not None and ctas < b.ctas_per_sm and not out:
            out.append(GateFinding(check="occupancy", field=b.field, message=f"{name}: {ctas} program(s) an SM < "
                                                                             f"{b.ctas_per_sm} asked"))
    ctas = [c for c in (_ctas(k, limits) for k in outcome.kernels) if c is not None]
    res = GateResources(registers=outcome.registers, spills=outcome.spills, shared_bytes=outcome.shared_bytes,
                        threads=outcome.threads, ctas_per_sm=min(ctas) if ctas else None)
    return out, res


def gate(candidate: Candidate, outcome=None, *, workload: Workload, limits: DeviceProperties | None = None,
         budget: Budget | None = None, enforced: bool = True) -> GateDecision:
    """Decide on `candidate` for `workload` from its schedule (if any) and its ahead-of-time build `outcome` (a
    `kernelloop.core.build.aot.BuildOutcome`; None: the schedule alone is checked)."""
    first = gate_schedule(candidate, workload=workload, limits=limits, budget=budget, enforced=enforced)
    if outcome is None or not first.passed:
        return first
    return with_build(first, outcome, limits)


def gate_schedule(candidate: Candidate, *, workload: Workload, limits: DeviceProperties | None = None,
                  budget: Budget | None = None, enforced: bool = True) -> GateDecision:
    """The decision before any build: the checks of the schedule the candidate was lowered from (`schedule` None and
    nothing found for a candidate without one), with the budget its build is to be held to."""
    lim = limits or HOPPER
    elem = workload.dtype.itemsize
    findings: list[GateFinding] = []
    sched = schedule_of(candidate.source)
    name = None
    if sched is not None:
        name = sched.name
        try:
            sched = sched.bind(candidate.config)
        except ValueError as e:
            findings.append(GateFinding(check="schedule", message=f"the config does not bind the schedule: {e}"))
        else:
            findings += check_schedule(sched, elem, lim)
            if budget is None:
                budget = schedule_budget(sched, elem, lim)
    return GateDecision(candidate_id=candidate.id, workload_id=workload.id, template=candidate.template,
                        passed=not findings, findings=findings, schedule=name, enforced=enforced, budget=budget)


def with_build(decision: GateDecision, outcome, limits: DeviceProperties | None = None, target: str = "sm_90") -> GateDecision:
    """`decision` (from `gate_schedule`) completed with the checks of the candidate's build `outcome` against the
    device's `limits` and the decision's budget."""
    more, resources = check_build(outcome, limits or HOPPER, decision.budget)
    findings = [*decision.findings, *more]
    return decision.model_copy(update={
        "passed": not findings, "findings": findings, "resources": resources, "build_status": outcome.status,
        "target": target, "checked": "schedule and build" if decision.schedule is not None else "build"})


def gate_candidate(candidate: Candidate, spec: OpSpec, workload: Workload, *, limits: DeviceProperties | None = None,
                   budget: Budget | None = None, arch: int = 90, timeout_s: float = 300.0) -> GateDecision:
    """Build the candidate ahead of time for sm_`arch` on this host and gate it. A schedule that fails its own checks
    is not built (nothing reaches even the compiler)."""
    from ...core.build.aot import build_configs
    first = gate(candidate, None, workload=workload, limits=limits, budget=budget)
    if not first.passed:
        return first
    with tempfile.TemporaryDirectory(prefix="kernelloop-gate-") as d:
        src = Path(d) / "candidate.py"
        src.write_text(candidate.source)
        (outcome,) = build_configs(spec, {candidate.template: src}, workload,
                                   [{"template": candidate.template, **candidate.config}], arch=arch, jobs=1,
                                   timeout_s=timeout_s)
    decision = gate(candidate, outcome, workload=workload, limits=limits, budget=budget)
    return decision


__all__ = ["HOPPER", "check_build", "check_schedule", "gate", "gate_candidate", "gate_schedule", "schedule_budget",
           "with_build"]

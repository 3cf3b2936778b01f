"""A schedule edit made a candidate: applied, bound to the op's epilogue, checked by the static gate, lowered.

`materialize_edit` raises `EditInvalid` (kernelloop.tune.schedule.patch) with the message a proposer gets back; the
schedule side of an edit (the patch, the record's validation) is kernelloop.tune.schedule.patch, the checks are
check.py's `check_schedule`.
"""

from __future__ import annotations

from pydantic import ValidationError

from ...base.records.device import DeviceProperties
from ...base.records import Candidate, OpSpec
from ..schedule.lower import NotLowerable, lower
from ..schedule.patch import EditInvalid, ScheduleEdit, apply_patch, base_schedule, pinned_params
from ..schedule.records import Schedule
from .check import check_schedule


def materialize_edit(edit: ScheduleEdit, spec: OpSpec, *, sources: dict[str, str] | None = None,
                     elem: int = 2, limits: DeviceProperties | None = None, proposer: str = "manual",
                     parent_ids: list[str] | None = None, hypothesis: str = "") -> tuple[Schedule, Candidate]:
    """The edited schedule and its candidate, or EditInvalid with the gate's message."""
    sched = apply_patch(base_schedule(edit.base, sources), edit.patch, edit.name)
    pinned = {**pinned_params(spec), **edit.config}
    want = str(pinned.get("EPILOGUE", "none"))
    if sched.epilogue.fused and sched.epilogue.name != want:
        raise EditInvalid(f"epilogue.fused: {sched.epilogue.fused} is not the epilogue of {spec.name} "
                          f"(EPILOGUE={want!r})", field="epilogue.fused")
    try:
        sched = sched.bind({"EPILOGUE": want})    # the op's fused operations, checked and lowered with the rest
    except ValidationError as e:
        raise EditInvalid(f"epilogue.fused: EPILOGUE={want!r} names no fused operations a schedule has: "
                          f"{e.errors()[0]['msg']}", field="epilogue.fused") from None
    findings = check_schedule(sched, elem, limits)
    if findings:
        f = findings[0]
        more = "; ".join(f"{g.field}: {g.message}" for g in findings[1:])
        raise EditInvalid(f"the static gate rejects the edited schedule: {f.field}: {f.message}"
                          + (f" (also {more})" if more else ""), field=f.field, check=f.check)
    try:
        source = lower(sched)
    except NotLowerable as e:   # check_schedule lowers first; kept for a direct caller's clarity
        raise EditInvalid(str(e), field=e.field, check="lowering") from None
    config = {**sched.config(), **pinned}
    return sched, Candidate(op=spec.name, template="schedule", source=source, config=config,
                            parent_ids=list(parent_ids or []), proposer=proposer, hypothesis=hypothesis)


__all__ = ["materialize_edit"]

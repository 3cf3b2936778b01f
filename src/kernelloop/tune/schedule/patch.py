"""Schedule edits: a JSON Patch (RFC 6902) with a hypothesis, applied and validated.

    edit = ScheduleEdit(base="gluon_ws", patch=[{"op": "replace", "path": "/ring/stages", "value": 4}],
                        rationale=..., hypothesis=...)
    schedule = apply_patch(base_schedule(edit.base), edit.patch, edit.name)

The edit becomes a candidate through the static gate, `kernelloop.tune.gate.edit.materialize_edit` (the gate checks
schedules, so it sits above them), which raises `EditInvalid` with the message a proposer gets back: a patch that
does not apply, a schedule the record refuses (the field named), one the lowering cannot express, or one the static gate rejects
(barrier protocol, footprint; each finding with its field). A valid edit becomes a candidate whose source is the
lowered schedule and whose config is the schedule's numbers. The op fixes the epilogue: the edited schedule is
bound to its EPILOGUE (a patch of `/epilogue/fused` to anything else is refused).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...base.records import OpSpec
from .library import LIBRARY
from .lower import schedule_of
from .records import Schedule


class EditInvalid(ValueError):
    """The edit cannot become a candidate; the message says why, naming the schedule field."""

    def __init__(self, message: str, field: str = "", check: str = "schedule"):
        super().__init__(message)
        self.field = field
        self.check = check


class ScheduleEdit(BaseModel):
    """A proposer's edit of a schedule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: str = Field(description="The schedule edited: a template of the op generated from a schedule "
                                  f"({sorted(LIBRARY)} or their 'schedule_*' names), or a candidate id whose source "
                                  "was lowered from one.")
    patch: list[dict[str, Any]] = Field(min_length=1, max_length=64, description=(
        "RFC 6902 JSON Patch operations on the schedule's JSON, e.g. {\"op\": \"replace\", \"path\": "
        "\"/ring/stages\", \"value\": 4}."))
    name: str | None = Field(None, pattern=r"^[a-z][a-z0-9_]*$", description="The edited schedule's name (default: "
                                                                             "the base's with '_edit').")
    config: dict[str, int | str] = Field(default_factory=dict, description="Template parameters the schedule does "
                                                                           "not hold (e.g. TRANS_B, EPILOGUE).")


def base_schedule(base: str, sources: dict[str, str] | None = None) -> Schedule:
    """The schedule `base` names: a library template ('gluon_ws' or 'schedule_ws'), or a source it was lowered
    into (`sources`: candidate id or template -> source)."""
    for name, make in LIBRARY.items():
        if base in (name, "schedule_" + name.removeprefix("gluon_")):
            return make()
    if sources and base in sources:
        found = schedule_of(sources[base])
        if found is not None:
            return found
    known = sorted(LIBRARY) + sorted(k for k, v in (sources or {}).items() if schedule_of(v) is not None)
    raise EditInvalid(f"no schedule {base!r}; known: {known}", field="base")


def apply_patch(schedule: Schedule, patch: list[dict], name: str | None = None) -> Schedule:
    """The patched schedule (EditInvalid: the patch does not apply, or the result is no valid schedule)."""
    import jsonpatch
    doc = schedule.model_dump(mode="json")
    try:
        out = jsonpatch.apply_patch(doc, patch)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, ValueError) as e:
        raise EditInvalid(f"the patch does not apply: {e}", field="patch") from None
    out["name"] = name or (out.get("name") if out.get("name") != schedule.name else f"{schedule.name}_edit")
    try:
        return Schedule.model_validate(out)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(schedule)"
        raise EditInvalid(f"the edited schedule is invalid: {loc}: {first['msg']}", field=loc) from None


def pinned_params(spec: OpSpec) -> dict:
    """The op's single-valued parameters of its Gluon templates (EPILOGUE, TRANS_B): what every schedule of the op
    is launched with besides its own numbers."""
    for t in spec.templates:
        if t.name.startswith(("schedule", "gluon")):
            return {p.name: p.values[0] for p in t.params if len(p.values) == 1
                    and p.name not in ("BLOCK_K", "GROUP_M", "num_warps", "SUBTILE", "PINGPONG")}
    return {"EPILOGUE": "none", "TRANS_B": 0}


__all__ = ["EditInvalid", "ScheduleEdit", "apply_patch", "base_schedule", "pinned_params"]

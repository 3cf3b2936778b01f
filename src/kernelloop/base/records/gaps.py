"""Capability gaps as records (tune/gaps ranks them): where the representation, not the search, was the obstacle.
An occurrence is archived as a `capability-gap` event (base/records/events.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Record

GAP_EVENT = "capability-gap"
GapKind = Literal["inexpressible", "outside_space", "refused_edit", "failure_class"]


class CapabilityGap(Record):
    """One occurrence of something a proposal needed that the representation does not offer."""

    op: str
    kind: GapKind
    need: str = Field(description="What is missing, in words.")
    field: str = Field("", description="The schedule field, template parameter or rule it concerns.")
    source: str = Field(description="Who found it: 'llm:<model>', 'planner:<rule id>', 'gate', 'trials'.")
    workload_id: str = ""
    expected_change_pct: float | None = Field(None, description="The latency change the proposal expected (negative: "
                                                                "faster).")
    detail: str = ""


__all__ = ["CapabilityGap", "GAP_EVENT", "GapKind"]

"""Proposers: the protocol, and the rule planner (with its ask/tell adapter)."""

from .base import Evidence, Proposal, Proposer, flatten_evidence
from .planner import Plan, PlannerLimits, PlannerStrategy, RulePlanner

__all__ = ["Evidence", "Plan", "PlannerLimits", "PlannerStrategy", "Proposal", "Proposer", "RulePlanner",
           "flatten_evidence"]

"""The static gate before the GPU: every candidate built ahead of time for sm_90 on the host and checked (its
schedule's barrier protocol and footprint, its build's resources against the device and its declared budget)."""

from .archive import GatePrecision, decisions, precision, record_decision
from .check import check_build, check_schedule, gate, gate_candidate, gate_schedule, schedule_budget, with_build
from ...base.records.gate import Budget, GateDecision, GateFinding, GateResources

__all__ = ["Budget", "GateDecision", "GateFinding", "GatePrecision", "GateResources", "check_build",
           "check_schedule", "decisions", "gate", "gate_candidate", "gate_schedule", "precision",
           "record_decision", "schedule_budget", "with_build"]

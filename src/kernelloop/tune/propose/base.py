"""The proposer protocol: what a proposer receives and what it returns.

A proposer sees the parent's configuration, the evidence about it (a ProfileReport, or any mapping of evidence
names to values), its build resources, the pruned configuration space and the knowledge base. It returns
proposals: a configuration from that space, the hypotheses it makes falsifiable, and the knowledge entries it
relied on. It never builds, runs, times or archives anything; the controller does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

from ...base.records import BuildResources, Hypothesis, KernelProfile, ProfileReport
from ..profile.hypothesis import format_hypotheses

Evidence = Union[ProfileReport, KernelProfile, Mapping[str, Any], None]
"""What a proposer may be given about the parent."""


@dataclass(frozen=True)
class Proposal:
    """One proposed configuration with its falsifiable hypotheses and the entries it cites."""

    config: dict
    hypotheses: tuple[Hypothesis, ...] = ()
    cites: tuple[str, ...] = ()
    rule: str = ""
    rationale: str = ""
    parent: dict = field(default_factory=dict)

    def hypothesis_text(self) -> str:
        """The text form stored in `Candidate.hypothesis` (see kernelloop.tune.profile.hypothesis)."""
        return format_hypotheses(list(self.hypotheses))


class Proposer(Protocol):
    """Anything that turns evidence about a parent into proposals."""

    name: str

    def propose(self, parent_config: dict, evidence: Evidence, build: BuildResources | None,
                space: list[dict], kb: Any) -> list[Proposal]: ...


def flatten_evidence(evidence: Evidence, build: BuildResources | None = None) -> dict[str, Any]:
    """Evidence as one flat mapping of evidence names (see knowledge.EVIDENCE_NAMES) to values.

    From a ProfileReport: every canonical kernel metric, 'bottleneck', the roofline numbers
    ('roofline_fraction', 'arithmetic_intensity', 'dram_ratio', 'achieved_gbps') and its build resources;
    from a bare KernelProfile: its metrics and its class under the default thresholds.
    `build` (when given) overrides the report's. A plain mapping is taken as it is.
    """
    out: dict[str, Any] = {}
    report_build = None
    if isinstance(evidence, ProfileReport):
        if evidence.kernel is not None:
            out.update(evidence.kernel.metrics)
        if evidence.classification is not None:
            out["bottleneck"] = evidence.classification.bottleneck.value
        r = evidence.roofline
        if r is not None:
            for src, dst in (("fraction", "roofline_fraction"), ("arithmetic_intensity", "arithmetic_intensity"),
                             ("dram_ratio", "dram_ratio"), ("achieved_gbps", "achieved_gbps")):
                v = getattr(r, src)
                if v is not None:
                    out[dst] = v
        report_build = evidence.build
    elif isinstance(evidence, KernelProfile):
        from ..profile.classify import classify
        out.update(evidence.metrics)
        out["bottleneck"] = classify(evidence).bottleneck.value
    elif isinstance(evidence, Mapping):
        out.update(evidence)
    b = build if build is not None else report_build
    if b is not None:
        for key in ("registers", "spills", "shared_bytes", "stack_bytes", "local_loads", "local_stores",
                    "instructions", "tensor_instructions", "ldg128_fraction", "stg128_fraction"):
            v = getattr(b, key)
            if v is not None:
                out[key] = v
    return {k: v for k, v in out.items() if v is not None}


__all__ = ["Evidence", "Proposal", "Proposer", "flatten_evidence"]

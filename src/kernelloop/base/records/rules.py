"""StaticRuleHit: one static rule that a candidate's source breaks, with where and why.

Produced by `kernelloop.core.verify.rules.check_source` before a candidate is ever imported; any hit makes the
verdict REJECTED. (Named `StaticRuleHit` because `RuleHit` is the Nsight Compute rule record of
`records.profile`.)
"""

from __future__ import annotations

from pydantic import Field

from .base import Record


class StaticRuleHit(Record):
    """A source rule broken at one place of the candidate's source."""

    rule: str = Field(description="Rule id, e.g. 'library-op', 'torch-on-hot-path', 'try-except'.")
    line: int = Field(ge=1, description="1-based line of the offending node.")
    col: int = Field(ge=0, description="0-based column of the offending node.")
    snippet: str = Field(description="The offending source line, stripped (at most 200 characters).")
    rationale: str = Field(description="Why the rule exists: the attack it closes.")
    detail: str = Field("", description="What exactly matched, e.g. 'torch.nn.functional.layer_norm'.")

    @property
    def message(self) -> str:
        """The verdict message: '<rule> at line N: <what matched>. <rationale>'."""
        return f"{self.rule} at line {self.line}: " + (f"{self.detail}. " if self.detail else "") + self.rationale

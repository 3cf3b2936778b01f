"""Candidate: *how* to compute: kernel source plus a configuration, with lineage."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Record, content_hash, sha256_hex


class Candidate(Record):
    """A kernel source and configuration submitted by a proposer."""

    op: str = Field(description="Op the candidate implements.")
    template: str = Field(description="Template name the source came from ('custom' for free-form code).")
    language: Literal["triton"] = Field("triton", description="Kernel language.")
    source: str = Field(description="Full kernel source; must define `launch(*inputs, **config)`.")
    config: dict[str, Any] = Field(default_factory=dict, description="Keyword configuration for `launch`.")
    parent_ids: list[str] = Field(default_factory=list, description="Candidates this one was derived from.")
    proposer: str = Field("manual", description="Who proposed it (strategy or agent name).")
    hypothesis: str = Field("", description="What the proposer expects to change, falsifiable.")

    @property
    def source_hash(self) -> str:
        return sha256_hex(self.source)

    @property
    def id(self) -> str:
        """Content address of everything that determines the result: language, source, config."""
        return "c-" + content_hash({"language": self.language, "source": self.source_hash, "config": self.config})

    @property
    def label(self) -> str:
        cfg = ",".join(f"{k}={v}" for k, v in sorted(self.config.items()))
        return f"{self.template}({cfg})"

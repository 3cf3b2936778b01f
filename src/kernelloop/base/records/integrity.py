"""The integrity of a run's archive rows (kernelloop.core.archive.integrity computes it): what `show`, `agent status`,
`report` and `export` state about a run before they use its verdicts and times."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Record

IntegrityState = Literal["authenticated", "tampered", "unauthenticated", "unverifiable"]


class RunIntegrity(Record):
    """What `show`, `agent status`, `report` and `export` say about a run's rows."""

    run_id: str
    state: IntegrityState = Field(description="authenticated: every row carries a good MAC; tampered: some row "
                                              "lacks one or has a wrong one; unauthenticated: the run has no MAC "
                                              "marker (written before MACs or without a key); unverifiable: marked, "
                                              "but its key cannot be read here.")
    reason: str = ""
    tampered: list[str] = Field(default_factory=list, description="The rows that fail: 'run', 'trial 3', "
                                                                  "'final <workload>', ...")
    commitment: str = Field("", description="sha256 over every MAC of the run (authenticated runs): what a package "
                                            "exported from it binds to.")

    @property
    def authenticated(self) -> bool:
        return self.state == "authenticated"

    def line(self) -> str:
        """One line for a terminal: the state and, when not authenticated, why."""
        if self.state == "authenticated":
            return "integrity: authenticated (every row carries a good MAC under the run key)"
        if self.state == "tampered":
            shown = ", ".join(self.tampered[:8]) + (" ..." if len(self.tampered) > 8 else "")
            return f"integrity: TAMPERED: {len(self.tampered)} row(s) fail their MAC ({shown})"
        if self.state == "unverifiable":
            return f"integrity: UNVERIFIED: the run's rows carry MACs but its key cannot be read here ({self.reason})"
        return "integrity: unauthenticated (legacy): the archive carries no MACs (written before them or without a key)"


__all__ = ["IntegrityState", "RunIntegrity"]

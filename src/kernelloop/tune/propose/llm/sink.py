"""Where the LLM proposer's events go, and the knowledge base it reads by default.

`ArchiveSink` appends the proposer's events to the run's archive (notes only: it never reads or writes trials);
the run itself (the controller with this proposer) is `kernelloop.tune.loop.llm.run_llm`.
"""

from __future__ import annotations

from pathlib import Path

from ....base.records import Record
from ....core.archive import Archive


class ArchiveSink:
    """Appends proposer events to the run's archive, one transaction per event, through its own connection."""

    def __init__(self, archive_path: str | Path):
        self.path = Path(archive_path)

    def __call__(self, run_id: str, events: list[Record]) -> None:
        """Append the events (`llm-*` and `capability-gap` records of base/records/events.py)."""
        with Archive(self.path) as archive:
            for event in events:
                archive.log_event(run_id, event)


def default_knowledge():
    """The repository's knowledge base, or None when it cannot be loaded."""
    try:
        from ...knowledge import load_knowledge
        return load_knowledge()
    except Exception:  # noqa: BLE001 - the proposer works without a knowledge base
        return None


__all__ = ["ArchiveSink", "default_knowledge"]

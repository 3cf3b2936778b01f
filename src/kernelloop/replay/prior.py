"""The transfer prior of `kernelloop optimize --prior SPACE`: learnt from a recording of another shape or GPU.

One prior from the whole recording (a `kernelloop record` space file or a Kernel Tuner cache): every PASSED
measurement of every recorded workload, each workload's objective divided by that workload's best so shapes of
different cost pool into one additive model of log(objective) (`TransferPrior.from_spaces`). The recorded
workload closest to a target is not singled out: every target workload is warmed by the same prior.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..search.history import TransferPrior
from .load import load_workload_spaces


@dataclass
class RecordedPrior:
    path: str                 # as given
    sha256: str               # of the file's bytes
    prior: TransferPrior

    def as_dict(self) -> dict:
        """What a run archives about its warm start."""
        return {"path": self.path, "sha256": self.sha256, "configurations": self.prior.configurations}


def read_prior(path: str | Path, op: str | None = None) -> RecordedPrior:
    """The prior learnt from the recording at `path`. ValueError, saying why, when the file is missing, unreadable
    or no recording, records another op than `op` (when it names one), or has fewer than two measured
    configurations."""
    path = Path(path)
    try:
        spaces = load_workload_spaces(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except (OSError, EOFError, ValueError) as e:
        raise ValueError(f"not a readable recording: {e}") from e
    recorded = spaces[0].meta.get("op")
    if op is not None and recorded is not None and recorded != op:
        raise ValueError(f"a recording of op {recorded!r}, not {op!r}")
    return RecordedPrior(str(path), digest, TransferPrior.from_spaces(spaces))

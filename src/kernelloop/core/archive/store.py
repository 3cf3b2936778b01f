"""The run archive: one SQLite file in the run folder, the durable store of an optimization run.

Every write is one explicit transaction (`BEGIN IMMEDIATE ... COMMIT`), so a controller killed with
`kill -9` at any instant leaves either the whole write or none of it. A resumed controller asks
`find_trial` before evaluating a (candidate, workload) and `next_index` for the next trial number;
`record_trial` refuses duplicates, so nothing is lost or recorded twice.

The connection and its transactions are `connection.py`; the tables' reads and writes `runs.py` (runs, candidates,
workloads, trials) and `results.py` (baselines, finals, confirmations, fronts, events, profiles).
"""

from __future__ import annotations

from .connection import ArchiveError
from .results import ResultRecords
from .runs import RunRecords
from .schema import LATEST_VERSION


class Archive(RunRecords, ResultRecords):
    """SQLite store of runs, candidates, workloads, trials, baselines, finals, fronts and events.

    Open with `Archive(path)` (the file and its folder are created if missing), or as a context
    manager. One connection, guarded by a lock, so an instance may be shared between threads; several
    processes may open the same file (WAL: readers never block the writer).
    """

    def __enter__(self) -> "Archive":
        return self


__all__ = ["Archive", "ArchiveError", "LATEST_VERSION"]

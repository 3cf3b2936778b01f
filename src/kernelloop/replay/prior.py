"""The transfer prior of `kernelloop optimize --prior SPACE`: learnt from a recording of another shape or GPU.

One prior from the whole recording (a `kernelloop record` space file, a Kernel Tuner cache, or the archive of an
earlier run: `archive.sqlite` or its run folder, all of its runs' PASSED trials): every PASSED
measurement of every recorded workload, each workload's objective divided by that workload's best so shapes of
different cost pool into one additive model of log(objective) (`TransferPrior.from_spaces`). The recorded
workload closest to a target is not singled out: every target workload is warmed by the same prior.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..search.history import TransferPrior
from .load import load_workload_spaces
from .space import RecordedSpace


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
    if path.is_dir() and (path / "archive.sqlite").is_file():   # a run folder
        path = path / "archive.sqlite"
    try:
        spaces = archive_spaces(path) if _is_sqlite(path) else load_workload_spaces(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except (OSError, EOFError, ValueError) as e:
        raise ValueError(f"not a readable recording: {e}") from e
    if not spaces:
        raise ValueError("not a readable recording: it holds no run")
    recorded = spaces[0].meta.get("op")
    if op is not None and recorded is not None and recorded != op:
        raise ValueError(f"a recording of op {recorded!r}, not {op!r}")
    return RecordedPrior(str(path), digest, TransferPrior.from_spaces(spaces))


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def archive_spaces(path: Path) -> list[RecordedSpace]:
    """One RecordedSpace per workload of every run in a kernelloop archive (`runs/<run>/archive.sqlite`): the
    configurations its PASSED trials measured, each with its best kernel median (a configuration measured twice,
    e.g. by a proposer that asked it again, keeps its faster time)."""
    from ..archive import Archive, ArchiveError

    try:
        with Archive(path, readonly=True) as archive:
            return _spaces_of(archive, path)
    except (ArchiveError, sqlite3.Error) as e:
        raise ValueError(f"{path}: {e}") from e


def _spaces_of(archive, path: Path) -> list[RecordedSpace]:
    from ..records import Status
    from ..search.encoding import config_key

    spaces = []
    for run in archive.runs():
        best: dict[str, dict[str, tuple[dict, float]]] = {}   # workload -> configuration key -> (config, µs)
        for t in archive.trials(run["id"], status=Status.PASSED):
            cand = archive.get_candidate(t.candidate_id)
            if t.measurement is None or cand is None or cand.template is None:
                continue
            cfg = {"template": cand.template, **cand.config}
            v = t.measurement.kernel.median_us
            mine = best.setdefault(t.workload_id, {})
            if config_key(cfg) not in mine or v < mine[config_key(cfg)][1]:
                mine[config_key(cfg)] = (cfg, v)
        for wid, got in best.items():
            spaces.append(RecordedSpace(f"{run['id']}:{wid}", [c for c, _ in got.values()],
                                        [v for _, v in got.values()], ["ok"] * len(got), "kernel_us",
                                        meta={"op": run["op"], "path": str(path), "workload": wid}))
    return spaces

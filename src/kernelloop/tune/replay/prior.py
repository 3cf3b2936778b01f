"""The transfer prior of `kernelloop optimize --prior SPACE`: learnt from a recording of another shape or GPU.

One prior from the whole recording (a `kernelloop record` space file, a Kernel Tuner cache, or the archive of an
earlier run: `archive.sqlite`, compressed (.xz, .gz) or not, or its run folder, all of its runs' PASSED trials): every PASSED
measurement of every recorded workload, each workload's objective divided by that workload's best so shapes of
different cost pool into one additive model of log(objective) (`TransferPrior.from_spaces`). Several recordings
(`--prior` repeated) pool into one prior, a workload recorded in more than one with its measurements merged (per
GPU: see `TransferPrior.from_spaces`). The
model is shared by every target workload; the configurations a warm start tries first are those the target
workload itself measured best when it was recorded, else those of the recorded workload nearest in shape
(`TransferPrior.for_workload`).
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ...base.compressed import CompressedFileError, open_bytes
from ...base.records.summary import WarmStart
from ..search.history import TransferPrior
from .load import load_workload_spaces
from .space import RecordedSpace


@dataclass
class RecordedPrior:
    files: list[tuple[str, str]]    # (path as given, sha256 of the file's bytes), one per recording
    prior: TransferPrior

    @property
    def path(self) -> str:
        return " + ".join(p for p, _ in self.files)

    def as_dict(self) -> dict:
        """What a run archives about its warm start: `files` (path, sha256 each) and, for one recording, its `path`
        and `sha256` too (the form runs archived before several recordings were allowed)."""
        out = {"files": [{"path": p, "sha256": h} for p, h in self.files],
               "configurations": self.prior.configurations}
        if len(self.files) == 1:
            out |= {"path": self.files[0][0], "sha256": self.files[0][1]}
        return out

    def warm_start(self) -> WarmStart:
        """`as_dict` as the record a run's options hold (`RunOptions.prior`)."""
        return WarmStart.model_validate(self.as_dict())


def prior_files(archived: WarmStart | None) -> list[tuple[str, str]]:
    """(path, sha256) of each recording a warm start names (`RunOptions.prior`; either archived form reads into it)."""
    return [] if archived is None else [(f.path, f.sha256) for f in archived.files]


def read_prior(paths: str | Path | list, op: str | None = None) -> RecordedPrior:
    """The prior learnt from the recording(s) at `paths` (one path or a list). ValueError, saying which file and
    why, when a file is missing, unreadable or no recording, records another op than `op` (when it names one), or
    the recordings together hold fewer than two measured configurations."""
    many = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not many:
        raise ValueError("no recording given")
    spaces, files = [], []
    for given in many:
        path = Path(given)
        if path.is_dir() and (path / "archive.sqlite").is_file():   # a run folder
            path = path / "archive.sqlite"
        where = f"{path}: " if len(many) > 1 else ""
        try:
            got = archive_spaces(path) if _is_sqlite(path) else load_workload_spaces(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except (OSError, EOFError, ValueError) as e:
            raise ValueError(f"{where}not a readable recording: {e}") from e
        if not got:
            raise ValueError(f"{where}not a readable recording: it holds no run")
        recorded = got[0].meta.get("op")
        if op is not None and recorded is not None and recorded != op:
            raise ValueError(f"{where}a recording of op {recorded!r}, not {op!r}")
        if any(str(path) == p for p, _ in files):
            raise ValueError(f"{path} is given twice")
        spaces += got
        files.append((str(path), digest))
    return RecordedPrior(files, TransferPrior.from_spaces(spaces))


def _is_sqlite(path: Path) -> bool:
    """An SQLite file, or a compressed one (the name ends in .xz or .gz), by its first bytes."""
    import lzma
    try:
        with open_bytes(path) as f:
            return f.read(16) == b"SQLite format 3\x00"
    except (OSError, EOFError, lzma.LZMAError, CompressedFileError):
        return False


def archive_spaces(path: Path) -> list[RecordedSpace]:
    """One RecordedSpace per workload of every run in a kernelloop archive (`runs/<run>/archive.sqlite`): the
    configurations its PASSED trials measured, each with its best kernel median (a configuration measured twice,
    e.g. by a proposer that asked it again, keeps its faster time)."""
    from ...core.archive import Archive, ArchiveError

    try:
        with Archive(path, readonly=True) as archive:
            return _spaces_of(archive, path)
    except (ArchiveError, sqlite3.Error) as e:
        raise ValueError(f"{path}: {e}") from e


def _spaces_of(archive, path: Path) -> list[RecordedSpace]:
    from ...base.records import Status
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
            w = archive.get_workload(wid)
            env = run.get("environment") or {}
            spaces.append(RecordedSpace(f"{run['id']}:{wid}", [c for c, _ in got.values()],
                                        [v for _, v in got.values()], ["ok"] * len(got), "kernel_us",
                                        meta={"op": run["op"], "path": str(path), "workload": wid,
                                              "device": env.get("gpu") or env.get("device") or "",
                                              **({"axes": dict(w.axes), "dtype": w.dtype.value}
                                                 if w is not None else {})}))
    return spaces

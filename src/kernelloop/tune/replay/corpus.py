"""The corpus of recorded spaces (benchmarks/spaces/): its fixed tuning / held-out split and each space's facts.

`split.toml` beside the spaces names every space file once (its name less `.json` and the compression suffix) with
its set ("tuning" or "heldout"), kernel, GPU and architecture, the date the split was decided and the rule used.
`load_split` reads it and refuses a split that misses a space of the folder, names one that is not there, or
gives a set other than those two; `split_paths` gives the files of one set, `select_paths` those a benchmark runs
(the tuning set unless told otherwise, so strategy work does not see the held-out spaces by default). `describe` loads a space with the
loader the benchmarks use and counts its failed configurations; `corpus_table` is the markdown table of the
folder (`python benchmarks/vendor_spaces.py --list`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...base.compressed import plain_name
from .load import load_space

SPLIT_FILE = "split.toml"
SETS = ("tuning", "heldout")


class SpaceEntry(BaseModel):
    """One space's line of the split."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    set_: Literal["tuning", "heldout"] = Field(alias="set")
    kernel: str
    gpu: str
    arch: str


class Split(BaseModel):
    """The split of a folder of spaces: when it was decided, by which rule, and each space's set."""

    model_config = ConfigDict(extra="forbid")
    decided: str
    rule: str
    spaces: dict[str, SpaceEntry]

    def names(self, which: str) -> list[str]:
        """The space names of `which` ("tuning", "heldout" or "all"), sorted."""
        if which == "all":
            return sorted(self.spaces)
        if which not in SETS:
            raise ValueError(f"a split set is one of {SETS} or 'all', got {which!r}")
        return sorted(n for n, e in self.spaces.items() if e.set_ == which)


class SpaceInfo(BaseModel):
    """What the loader reads from one space file."""

    file: str
    name: str
    configs: int
    failed: int
    failure_share: float
    entry: SpaceEntry | None = None


def space_name(path: str | Path) -> str:
    """A space file's name in the split: the file name less its compression suffix and `.json`."""
    name = plain_name(path)
    return name[: -len(".json")] if name.endswith(".json") else name


def space_files(folder: str | Path) -> list[Path]:
    """Every recorded space in `folder` (*.json, *.json.xz, *.json.gz), sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if plain_name(p).endswith(".json"))


def load_split(folder: str | Path, split_file: str | Path | None = None) -> Split:
    """The split of `folder` (its split.toml unless `split_file`), checked to cover every space file exactly once."""
    folder = Path(folder)
    path = Path(split_file) if split_file is not None else folder / SPLIT_FILE
    with path.open("rb") as fh:
        split = Split.model_validate(tomllib.load(fh))
    present = [space_name(p) for p in space_files(folder)]
    dup = sorted({n for n in present if present.count(n) > 1})
    missing = sorted(set(present) - set(split.spaces))
    absent = sorted(set(split.spaces) - set(present))
    if dup or missing or absent:
        raise ValueError(f"{path}: the split must name every space of {folder} once; "
                         f"in two files: {dup}; not in the split: {missing}; in the split but not there: {absent}")
    return split


def split_paths(folder: str | Path, which: str = "all", split_file: str | Path | None = None) -> list[Path]:
    """The space files of `folder` in set `which` ("tuning", "heldout" or "all")."""
    names = set(load_split(folder, split_file).names(which))
    return [p for p in space_files(folder) if space_name(p) in names]


def select_paths(folder: str | Path, which: str | None = None) -> list[Path]:
    """The spaces a benchmark runs: set `which` of the folder's split; by default its tuning spaces, or every space
    of a folder that has no split.toml (a folder of one's own spaces). Naming a set needs a split file."""
    folder = Path(folder)
    if not (folder / SPLIT_FILE).is_file():
        if which not in (None, "all"):
            raise ValueError(f"{folder} has no {SPLIT_FILE}: no {which!r} set to select")
        return space_files(folder)
    return split_paths(folder, which or "tuning")


def describe(path: str | Path, entry: SpaceEntry | None = None) -> SpaceInfo:
    """Configurations and failures of one space file, as the benchmarks load it."""
    space = load_space(path)
    n = len(space)
    return SpaceInfo(file=Path(path).name, name=space.name, configs=n, failed=space.n_failed,
                     failure_share=space.n_failed / n if n else 0.0, entry=entry)


def corpus_table(folder: str | Path) -> str:
    """Markdown table of every space of `folder`: set, kernel, GPU, architecture, configurations, failure share."""
    split = load_split(folder)
    lines = ["| space | set | kernel | GPU | architecture | configurations | failed | failure share |",
             "|---|---|---|---|---|---|---|---|"]
    for p in space_files(folder):
        e = split.spaces[space_name(p)]
        info = describe(p, e)
        lines.append(f"| {space_name(p)} | {e.set_} | {e.kernel} | {e.gpu} | {e.arch} | {info.configs} | "
                     f"{info.failed} | {100 * info.failure_share:.1f} % |")
    return "\n".join(lines)

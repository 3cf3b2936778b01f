"""benchmarks/spaces/: the split names every vendored space exactly once, the loader reads every space and the
failure shares it reports (the spaces README table) are current; a split that misses or invents a space is refused."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelloop.tune.replay.corpus import (corpus_table, describe, load_split, select_paths, space_files,
                                           space_name)

ROOT = Path(__file__).resolve().parents[2]
SPACES = ROOT / "benchmarks" / "spaces"

# 6 entries: 1 InvalidConfig (not part of the space), 2 failures (one compile, one runtime), 3 measured
CACHE = {"device_name": "Fake", "kernel_name": "k", "problem_size": 1, "objective": "time",
         "tune_params_keys": ["x"], "tune_params": {"x": [1, 2, 3, 4, 5, 6]},
         "cache": {"1": {"x": 1, "time": 1.0}, "2": {"x": 2, "time": "CompilationFailedConfig"},
                   "3": {"x": 3, "time": 3.0}, "4": {"x": 4, "time": "InvalidConfig"},
                   "5": {"x": 5, "time": "RuntimeFailedConfig"}, "6": {"x": 6, "time": 2.0}}}
ENTRY = '{ set = "%s", kernel = "k", gpu = "g", arch = "a" }'


def _folder(tmp_path, names=("a", "b"), split=(("a", "tuning"), ("b", "heldout"))):
    for n in names:
        (tmp_path / f"{n}.json").write_text(json.dumps(CACHE))
    lines = ['decided = "2026-12-07"', 'rule = "r"', "[spaces]"] + [f"{n} = {ENTRY % s}" for n, s in split]
    (tmp_path / "split.toml").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_failure_share_counts_failures_and_leaves_invalid_configs_out(tmp_path):
    info = describe(_folder(tmp_path) / "a.json")
    assert (info.configs, info.failed) == (5, 2)
    assert info.failure_share == pytest.approx(0.4)


def test_the_split_names_every_vendored_space_exactly_once():
    split = load_split(SPACES)
    files = [space_name(p) for p in space_files(SPACES)]
    tuning, heldout = split.names("tuning"), split.names("heldout")
    assert not set(tuning) & set(heldout)
    assert sorted(tuning + heldout) == sorted(files) == split.names("all")
    assert len(files) >= 20 and len(heldout) == 11
    # every held-out space is on a GPU that has no tuning space
    assert not {split.spaces[n].gpu for n in heldout} & {split.spaces[n].gpu for n in tuning}


def test_the_spaces_readme_table_is_the_loaders_current_listing():
    """Loads every vendored space (its configurations and failure share as the benchmarks read them)."""
    table = corpus_table(SPACES)
    assert len(table.splitlines()) == 2 + len(space_files(SPACES))
    assert table in (SPACES / "README.md").read_text()
    shares = [float(line.split("|")[-2].strip(" %")) for line in table.splitlines()[2:]]
    assert sum(s >= 10 for s in shares) >= 3


@pytest.mark.parametrize("names, split, match", [
    (("a", "b"), (("a", "tuning"),), r"not in the split: \['b'\]"),
    (("a",), (("a", "tuning"), ("b", "heldout")), r"not there: \['b'\]"),
])
def test_a_split_that_misses_or_invents_a_space_is_refused(tmp_path, names, split, match):
    with pytest.raises(ValueError, match=match):
        load_split(_folder(tmp_path, names, split))


def test_a_split_with_an_unknown_set_is_refused(tmp_path):
    with pytest.raises(ValidationError):
        load_split(_folder(tmp_path, ("a",), (("a", "test"),)))


def test_benchmarks_select_the_tuning_set_by_default(tmp_path):
    folder = _folder(tmp_path)
    assert [p.name for p in select_paths(folder)] == ["a.json"]
    assert [p.name for p in select_paths(folder, "heldout")] == ["b.json"]
    assert [p.name for p in select_paths(folder, "all")] == ["a.json", "b.json"]
    (folder / "split.toml").unlink()            # a folder of one's own spaces: all of them
    assert [p.name for p in select_paths(folder)] == ["a.json", "b.json"]
    with pytest.raises(ValueError, match="no split.toml"):
        select_paths(folder, "heldout")

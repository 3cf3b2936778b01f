"""benchmarks/strategies_failures.py: --conditions runs only the conditions named, --option reaches the strategy's
constructor and its runs are cached under the setting's own --label."""

import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NS = runpy.run_path(str(ROOT / "benchmarks" / "strategies_failures.py"))
SPACE = ROOT / "benchmarks" / "spaces" / "kt_pnpoly_RTX_3090.json.xz"     # has failures: both conditions


def test_one_condition_and_an_option_under_its_label(tmp_path):
    spaces = tmp_path / "spaces"
    spaces.mkdir()
    (spaces / SPACE.name).symlink_to(SPACE)
    cache = tmp_path / "cache"
    common = ["--spaces", str(spaces), "--only", "staged", "--seeds", "1", "--budget", "12", "--cache", str(cache),
              "--conditions", "kept"]
    assert NS["main"](common + ["--label", "staged@ct0.6", "--option", "candidate_threshold=0.6"]) == 0
    files = sorted(p.name for p in cache.iterdir())
    # filed under the space's gzipped name (`.json.gz`), the name the committed tables and run packs use, though
    # the space is kept as .json.xz: a rerun from a committed pack finds its runs
    assert files == ["staged@ct0.6--kt_pnpoly_RTX_3090.json.gz--kept--b12.jsonl"]
    run = json.loads((cache / files[0]).read_text())
    assert run["seed"] == 0 and run["evaluations"] == 12
    assert NS["main"](common + ["--label", "staged@ct0.6", "--option", "candidate_threshold=0.6"]) == 0
    assert len((cache / files[0]).read_text().splitlines()) == 1          # the cached seed is not run again
    with pytest.raises(ValueError, match="failures"):     # the option is the constructor's
        NS["main"](common + ["--label", "staged@bad", "--option", 'failures="bogus"'])


@pytest.mark.parametrize("argv", [["--option", "candidate_threshold=0.6"],            # no --label
                                  ["--label", "x", "--option", "candidate_threshold"],  # no value
                                  ["--label", "x", "--option", "k=not json"],
                                  ["--conditions", "both"]])
def test_bad_arguments_are_refused(argv, tmp_path):
    with pytest.raises(SystemExit):
        NS["main"](argv + ["--cache", str(tmp_path / "cache"), "--only", "staged"])
    assert not (tmp_path / "cache").exists()

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


# a tiny synthetic space in declaration order: times 10, (failed), 5.2, 8, 5.05, 5.0 -> optimum 5.0; within 5 %
# (<= 5.25) first at 5.2, within 2 % (<= 5.1) first at 5.05
TINY = {"device_name": "Fake", "kernel_name": "tiny", "problem_size": 1, "objective": "time",
        "tune_params_keys": ["x"], "tune_params": {"x": [0, 1, 2, 3, 4, 5]},
        "cache": {str(i): {"x": i, "time": t}
                  for i, t in enumerate([10.0, "RuntimeFailedConfig", 5.2, 8.0, 5.05, 5.0])}}


@pytest.mark.parametrize("kept, e2, e5, fails", [(True, 5, 3, 1), (False, 4, 2, 0)])
def test_evaluations_to_threshold_on_a_tiny_space(tmp_path, kept, e2, e5, fails):
    """A failed configuration counts as an evaluation when failures are kept; none when they are dropped."""
    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    full = NS["load_space"](tmp_path / "tiny.json")
    space = full if kept else full.valid_only()
    r = NS["run_one"]("exhaustive", space, 0, 10, kept)
    assert (r["e2"], r["e5"], r["fails"], r["evaluations"]) == (e2, e5, fails, len(space))
    assert r["p50"] == r["p100"] == 1.0
    short = NS["run_one"]("exhaustive", space, 0, e2 - 1, kept)     # the budget ends one before: never within 2 %
    assert short["e2"] is None and short["e5"] == e5


def test_split_selects_the_spaces_run(tmp_path):
    spaces = tmp_path / "spaces"
    spaces.mkdir()
    for name in ("a", "b"):
        (spaces / f"{name}.json").write_text(json.dumps(TINY))
    entry = '{ set = "%s", kernel = "k", gpu = "g", arch = "x" }'
    (spaces / "split.toml").write_text(f'decided = "2026-12-07"\nrule = "r"\n[spaces]\na = {entry % "tuning"}\n'
                                       f'b = {entry % "heldout"}\n')
    cache = tmp_path / "cache"
    common = ["--spaces", str(spaces), "--only", "exhaustive", "--seeds", "1", "--budget", "6", "--cache", str(cache),
              "--conditions", "dropped"]
    assert NS["main"](common) == 0                                       # default: the tuning set
    assert sorted(p.name for p in cache.iterdir()) == ["exhaustive--a.json--dropped--b6.jsonl"]
    assert NS["main"](common + ["--split", "heldout"]) == 0
    assert sorted(p.name for p in cache.iterdir()) == ["exhaustive--a.json--dropped--b6.jsonl",
                                                       "exhaustive--b.json--dropped--b6.jsonl"]

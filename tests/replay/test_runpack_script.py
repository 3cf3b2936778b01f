"""benchmarks/runpack.py: the strategy benchmarks' per-run records packed into one `runs.jsonl.xz` per results folder;
unpacked, they give the committed tables again (benchmarks/strategies_failures.py), and packing them again gives the
committed bytes."""

import gzip
import importlib.util
import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from kernelloop.base.compressed import read_text

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
# (results folder, its table, the pack of the runs it is computed from)
PACKED = [("strategies-2026-12-03", "failures.json.xz", "runs.jsonl.xz"),
          ("strategies-40seeds-2026-12-03", "failures.json.xz", "runs.jsonl.xz"),
          ("2026-12-04-strategies-failures", "failures.json.xz", "runs.jsonl.xz"),
          ("2026-12-04-strategies-failures", "failures-40seeds.json.xz", "runs-40seeds.jsonl.xz")]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_{name}_script", ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


runpack = _load("runpack")


@pytest.mark.parametrize("folder,table,packed", PACKED)
def test_the_committed_runs_give_the_committed_table_and_pack_again_to_the_same_bytes(folder, table, packed, tmp_path):
    committed = json.loads(read_text(RESULTS / folder / table))
    cache, out = tmp_path / "cache", tmp_path / "out"
    files = runpack.unpack(RESULTS / folder / packed, cache)
    assert files and not [p for p in (RESULTS / folder).rglob("*.jsonl")]
    failures = _load("strategies_failures")
    args = Namespace(cache=cache, out=out, budget=committed["meta"]["budget"], seeds=committed["meta"]["seeds"],
                     tag=committed["meta"]["date"], command=committed["meta"]["command"])
    failures.write_results(args, [Path(name) for name in committed["meta"]["spaces"]])
    assert json.loads((out / "failures.json").read_text())["table"] == committed["table"]
    assert (out / "runs.jsonl.xz").read_bytes() == (RESULTS / folder / packed).read_bytes()


def test_pack_and_unpack_round_trip_and_refuse_what_is_not_a_pack(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    rows = {"staged--s.json.gz--kept--b4.jsonl": [{"seed": 0, "e2": 3, "p50": 0.5}, {"seed": 1, "e2": None}],
            "kt_bayes_opt--s.json.gz--dropped--b4.jsonl": [{"seed": 0, "e2": 4}]}
    for name, rs in rows.items():
        (cache / name).write_text("".join(json.dumps(r) + "\n" for r in rs))
    assert runpack.pack(sorted(cache.glob("*.jsonl")), tmp_path / "p.jsonl.xz") == 3
    assert runpack.read(tmp_path / "p.jsonl.xz") == rows
    back = tmp_path / "back"
    assert [p.name for p in runpack.unpack(tmp_path / "p.jsonl.xz", back, only={"staged"})] == [
        "staged--s.json.gz--kept--b4.jsonl"]
    assert (back / "staged--s.json.gz--kept--b4.jsonl").read_text() == (
        cache / "staged--s.json.gz--kept--b4.jsonl").read_text()
    (back / "kt_bayes_opt--s.json.gz--dropped--b4.jsonl").write_text("mine\n")
    runpack.unpack(tmp_path / "p.jsonl.xz", back)           # a file already there is left as it is
    assert (back / "kt_bayes_opt--s.json.gz--dropped--b4.jsonl").read_text() == "mine\n"
    with gzip.open(tmp_path / "bad.jsonl.gz", "wt") as f:
        f.write('{"seed": 0}\n')
    with pytest.raises(ValueError, match="bad.jsonl.gz:1: not a packed run"):
        runpack.read(tmp_path / "bad.jsonl.gz")
    with gzip.open(tmp_path / "escape.jsonl.gz", "wt") as f:
        f.write(json.dumps({"file": "../x.jsonl", "run": {}}) + "\n")
    with pytest.raises(ValueError, match="not a cache file name"):
        runpack.unpack(tmp_path / "escape.jsonl.gz", back)

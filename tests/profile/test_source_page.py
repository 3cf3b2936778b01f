"""Nsight Compute's source page as CSV (`ncu --import R --csv --page source --print-source sass`): results, offsets
from the function's first address, numeric cells (thousands separators, empty cells), the metric chosen, errors."""

import gzip
from pathlib import Path

import pytest

from kernelloop.tune.profile.ncu_csv import NcuParseError
from kernelloop.tune.profile.source_page import named, opcode, parse_source_csv, pick_metric, read_source_csv

PAGE = Path(__file__).parents[1] / "fixtures" / "ptx" / "handwritten-ncu-source-page.csv"
ALL = "Warp Stall Sampling (All Samples)"


def test_results_offsets_and_values():
    page = read_source_csv(PAGE)
    assert [k.name for k in page] == ["scale_rows", "other_kernel"]
    k = page[0]
    assert k.columns[:3] == [ALL, "Warp Stall Sampling (Not-issued Samples)", "Instructions Executed"]
    assert len(k.instructions) == 13 and k.instructions[0].offset == 0
    ldg = next(i for i in k.instructions if i.offset == 0x1F0)
    assert ldg.address == 0x7FFE4C8001F0 and ldg.opcode == "LDG" and ldg.metrics[ALL] == 40
    assert ldg.metrics["Thread Instructions Executed"] == 32768   # "32,768"
    assert "stall_long_sb" not in k.instructions[-1].metrics        # an empty cell is no value
    assert k.total(ALL) == 165 and k.values(ALL)[0x2B0] == 30
    assert page[1].values(ALL) == {0: 5, 0x10: 7}                  # offsets from its own first address


def test_opcode_and_names():
    assert opcode("@!P0 LDG.E R1, desc[UR4][R2.64]") == "LDG" and opcode("EXIT") == "EXIT"
    assert opcode("@P1 BRA 0x7ffe4c8004b0") == "BRA" and opcode("") == ""
    page = parse_source_csv('"Kernel Name","scale_rows(float *, int)"\n"Address","Source","# Samples"\n'
                            '"0x100","EXIT","3"\n')
    assert named(page, "scale_rows") == page and named(page, "scale") == []


def test_the_metric_chosen():
    page = read_source_csv(PAGE)
    assert pick_metric(page) == ALL
    assert pick_metric(page, "Instructions Executed") == "Instructions Executed"
    assert pick_metric(page, "nonesuch") is None
    # nothing sampled: the executed counts weigh instead; neither column: none
    unsampled = parse_source_csv(f'"Kernel Name","k"\n"Address","Source","{ALL}","Instructions Executed"\n'
                                 f'"0x0","LDC R1, c[0x0][0x28]","0","64"\n"0x10","EXIT","0","64"\n')
    assert pick_metric(unsampled) == "Instructions Executed"
    bare = parse_source_csv('"Kernel Name","k"\n"Address","Source","Registers"\n"0x0","EXIT","12"\n')
    assert pick_metric(bare) is None


def test_bad_exports_are_refused(tmp_path):
    with pytest.raises(NcuParseError, match="no SASS table"):
        parse_source_csv('"ID","Kernel Name","Metric Name"\n"0","k","dram__bytes"\n')   # the details page
    with pytest.raises(NcuParseError, match="lacks the Source column"):
        parse_source_csv('"Kernel Name","k"\n"Address","Opcode"\n"0x0","EXIT"\n')
    gz = tmp_path / "page.csv.gz"
    gz.write_bytes(gzip.compress(PAGE.read_bytes()))
    assert [k.name for k in read_source_csv(gz)] == ["scale_rows", "other_kernel"]


def test_a_trials_profile_keeps_its_source_page(tmp_path, monkeypatch):
    """`profile_trial(..., source_page=True)`'s export: the page kept as profiles/<trial>.source.csv, a note saying
    what it holds; an export that fails or holds no counters says so."""
    from types import SimpleNamespace

    import kernelloop.tune.profile.ncu as ncu
    from kernelloop.tune.profile.ncu import NcuOptions, ncu_command
    from kernelloop.tune.profile.report import _keep_source_page, source_page_path
    assert "SourceCounters" in ncu_command("ncu", ["x"], tmp_path / "r", NcuOptions(sections=("SourceCounters",)))
    (tmp_path / "profiles").mkdir()
    rep = tmp_path / "profiles" / "t1.ncu-rep"
    rep.write_text("report")
    result = SimpleNamespace(run=SimpleNamespace(report=rep))
    asked = []
    monkeypatch.setattr(ncu, "export_csv", lambda r, page="details", **kw: asked.append(page) or PAGE.read_text())
    (note,) = _keep_source_page(result, tmp_path, "t1")
    assert asked == ["source"] and source_page_path(tmp_path, "t1").read_text() == PAGE.read_text()
    assert ALL in note and "profiles/t1.source.csv" in note
    monkeypatch.setattr(ncu, "export_csv", lambda r, **kw: '"Kernel Name","k"\n"Address","Source"\n"0x0","EXIT"\n')
    assert "no per-instruction samples" in _keep_source_page(result, tmp_path, "t2")[0]

    def fails(r, **kw):
        raise RuntimeError("ncu --import failed (exit 1)")
    monkeypatch.setattr(ncu, "export_csv", fails)
    assert _keep_source_page(result, tmp_path, "t3") == ["no source page: ncu --import failed (exit 1)"]

"""Hot windows weighed by Nsight Compute's source page: the page joined to the kernel's cubin (same offsets, same
opcodes), the windows ranked by its samples instead of the static estimate, results of other SASS left out with a
note, and a page that cannot weigh the kernel refused."""

from pathlib import Path

import pytest

from kernelloop.tune.profile.source_page import parse_source_csv, read_source_csv
from kernelloop.tune.ptx.tools import toolchain_missing
from kernelloop.tune.ptx.windows import ProfileMismatch, _cubin_of, hot_windows, profile_samples, window_sass

pytestmark = pytest.mark.skipif(bool(toolchain_missing()), reason=toolchain_missing() or "")

PAGE = Path(__file__).parents[1] / "fixtures" / "ptx" / "handwritten-ncu-source-page.csv"
ALL = "Warp Stall Sampling (All Samples)"


@pytest.fixture(scope="module")
def cubin(scale_rows):
    return _cubin_of(scale_rows)   # assembled once for the module


def test_the_profile_reranks_the_windows(scale_rows, cubin):
    profile = profile_samples(scale_rows, read_source_csv(PAGE), cubin=cubin)
    assert profile.metric == ALL and profile.results == 1 and profile.notes == []
    assert profile.samples[0x1F0] == 40 and sum(profile.samples.values()) == 165
    static = hot_windows(scale_rows, cubin=cubin)
    weighed = hot_windows(scale_rows, profile, cubin=cubin)
    assert {w.source for w in static} == {"sass"} and {w.source for w in weighed} == {"profile"}
    assert {w.profile_metric for w in weighed} == {ALL}
    by = {(w.label, w.start): w.weight for w in weighed}
    # the page's samples by source line: the loop's lines 20-22 hold 154 (+4 of line 20 outside any loop window),
    # line 10 (the entry block) 5, line 14 ($L__BB0_1) 1, line 30 ($L__BB0_3) 1; of 165 in all
    assert by["$L__BB0_2", 42] == pytest.approx(158 / 165, abs=1e-4)
    assert by["", 18] == pytest.approx(5 / 165, abs=1e-4)
    assert by["$L__BB0_3", 63] == pytest.approx(1 / 165, abs=1e-4)
    assert [w.label for w in static][:2] == ["$L__BB0_2", "$L__BB0_3"]   # statically, the NOP-padded exit next
    assert [(w.label, w.start) for w in weighed][:2] == [("$L__BB0_2", 42), ("", 18)]   # by samples, the entry
    shown = window_sass(scale_rows, weighed[0], cubin=cubin, profile=profile)
    assert any(ln.startswith("/*01f0*/") and ln.endswith(f"# 40 {ALL}") for ln in shown)


def test_a_metric_chosen_and_results_of_other_sass(scale_rows, cubin):
    text = PAGE.read_text()
    executed = profile_samples(scale_rows, parse_source_csv(text), "Instructions Executed", cubin=cubin)
    assert executed.metric == "Instructions Executed" and executed.samples[0x1F0] == 1024
    # a second result of the same name whose instruction at 0x1f0 is not an LDG: profiled from other SASS
    other = text.replace('"Kernel Name","other_kernel"', '"Kernel Name","scale_rows"').replace(
        '"0x7ffe4c900010","EXIT"', '"0x7ffe4c9001f0","EXIT"')
    mixed = profile_samples(scale_rows, parse_source_csv(other), cubin=cubin)
    assert mixed.results == 1 and len(mixed.notes) == 1
    assert "offset 0x1f0 is 'EXIT', the cubin's is 'LDG'" in mixed.notes[0]
    assert mixed.samples == profile_samples(scale_rows, parse_source_csv(text), cubin=cubin).samples


def test_pages_that_cannot_weigh_the_kernel(scale_rows, cubin):
    page = read_source_csv(PAGE)
    with pytest.raises(ProfileMismatch, match="no kernel named 'scale_rows'"):
        profile_samples(scale_rows, [k for k in page if k.name != "scale_rows"], cubin=cubin)
    shifted = parse_source_csv(PAGE.read_text().replace('"0x7ffe4c800000","LDC', '"0x7ffe4c7fff00","LDC'))
    with pytest.raises(ProfileMismatch, match="other SASS than this kernel's"):
        profile_samples(scale_rows, shifted, cubin=cubin)   # every offset moved by 0x100: no opcode matches
    with pytest.raises(ProfileMismatch, match="no per-instruction column 'nonesuch'"):
        profile_samples(scale_rows, page, "nonesuch", cubin=cubin)

"""`kernelloop report`: the HTML file rendered in a real headless Chromium (sections, screenshot, console).

The archives are two real H200 runs kept as fixtures: a rule-planner LayerNorm run (Nsight Compute evidence,
hypotheses with outcomes, lineage) and an exhaustive attention run (one WRONG_VALUES failure, seven baselines).
`.ci/run` installs Debian's `chromium`; set KERNELLOOP_REPORT_SHOTS=DIR to keep the screenshots.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.core.archive import Archive
from kernelloop.cli.app import app

ARCHIVES = Path(__file__).resolve().parents[1] / "fixtures" / "archives"
PLANNER = ARCHIVES / "h200-layernorm-planner.sqlite.xz"
ATTENTION = ARCHIVES / "h200-attention-exhaustive.sqlite.xz"
SECTIONS = ("provenance", "progress", "verdicts", "workloads", "front", "roofline", "lineage", "log")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (.ci/run installs Debian's package)")


def chromium(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on a local file, offline, with console messages logged to stderr."""
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", *args, page.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def console_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln]


def render(tmp_path: Path, archive: Path, name: str) -> Path:
    out = tmp_path / name
    res = CliRunner().invoke(app, ["report", str(archive), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.is_file() and str(out) in res.output
    return out


def test_report_is_one_offline_file_and_reads_the_archive_without_writing(tmp_path):
    before = PLANNER.read_bytes()
    html = render(tmp_path, PLANNER, "planner.html").read_text()
    assert PLANNER.read_bytes() == before
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html), "no network reference"
    assert "<script" not in html and "<link" not in html and "<img" not in html and "@import" not in html
    assert html.count("<svg") == 3        # progress, the one workload's front, roofline: inline, not files
    for s in SECTIONS:
        assert f'<section id="{s}">' in html


@needs_chromium
def test_planner_run_renders_in_chromium_with_every_section_and_no_console_message(tmp_path):
    page = render(tmp_path, PLANNER, "planner.html")
    dom = chromium(tmp_path, page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_lines(dom.stderr) == []
    text = dom.stdout
    for s in SECTIONS:
        assert f'id="{s}"' in text, s
    with Archive(PLANNER, readonly=True) as a:
        rid = a.runs()[0]["id"]
        trials = a.trials(rid)
        outcomes = [o.status for t in trials if (r := a.profile(rid, t.id)) is not None for o in r.outcomes]
    log = text[text.index('id="log"'):]
    assert log.count("<tr>") == len(trials) + 1          # header + one row per trial
    assert outcomes and log.count(": refuted") == outcomes.count("refuted")   # each profiled outcome is shown
    assert "planner" in log and "explore" in log         # proposer and the strategy's rationale
    lineage = text[text.index('id="lineage"'):text.index('id="log"')]
    assert lineage.count("<li>") == len({t.candidate_id for t in trials})
    assert "Pareto front" in text and "roofline: every measured candidate" in text

    shot = tmp_path / "planner.png"
    res = chromium(tmp_path, page, "--screenshot=" + str(shot), "--window-size=1300,2600")
    assert res.returncode == 0 and console_lines(res.stderr) == []
    import matplotlib.image as mpimg
    img = mpimg.imread(shot)
    assert img.shape[0] == 2600 and img.shape[1] == 1300
    assert img[..., :3].std() > 0.05, "the screenshot is not blank"
    if os.environ.get("KERNELLOOP_REPORT_SHOTS"):
        keep = Path(os.environ["KERNELLOOP_REPORT_SHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / shot.name)


@needs_chromium
def test_failures_and_every_baseline_are_shown(tmp_path):
    page = render(tmp_path, ATTENTION, "attention.html")
    dom = chromium(tmp_path, page, "--dump-dom")
    assert dom.returncode == 0 and console_lines(dom.stderr) == []
    text = dom.stdout
    verdicts = text[text.index('id="verdicts"'):text.index('id="workloads"')]
    assert "WRONG_VALUES" in verdicts and "values outside tolerance" in verdicts and "atol=" in verdicts
    with Archive(ATTENTION, readonly=True) as a:
        rid = a.runs()[0]["id"]
        (wid,) = a.finals(rid)
        names = list(a.baselines(rid, wid))
    table = text[text.index('id="baselines"'):]
    assert len(names) == 7 and all(f"<td>{n}</td>" in table for n in names)
    assert table.count("FASTER") + table.count("SLOWER") + table.count("SAME") >= len(names)


@needs_chromium
def test_the_console_check_catches_a_page_error(tmp_path):
    """The console assertion above would fail on a page that logs or throws (so its silence means something)."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><p>x</p><script>console.error('boom'); missing();</script></body></html>")
    res = chromium(tmp_path, bad, "--dump-dom")
    lines = console_lines(res.stderr)
    assert any("boom" in ln for ln in lines) and any("ReferenceError" in ln for ln in lines)


def test_missing_archive_and_bad_run_id_are_clear_errors(tmp_path):
    res = CliRunner().invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no archive" in res.output
    res = CliRunner().invoke(app, ["report", str(PLANNER), "--run-id", "r-nothere", "--out",
                                   str(tmp_path / "x.html")])
    # the console wraps long lines (the archive's path), so compare with whitespace folded
    assert res.exit_code == 3 and "no run 'r-nothere'" in " ".join(res.output.split())
    assert not (tmp_path / "x.html").exists()

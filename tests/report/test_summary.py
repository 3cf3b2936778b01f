"""The run summary is built as the `RunSummary` record and rendered from it: the terminal, HTML and JSON writers
all take the record (no dict built, validated and dumped back)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from kernelloop.base.records.summary import RunSummary
from kernelloop.core.archive import Archive
from kernelloop.deliver import api
from kernelloop.deliver.report import html
from kernelloop.deliver.report.summary import run_summary
from kernelloop.deliver.report.terminal import INTERPRETER_TIMING, render

ARCHIVES = Path(__file__).resolve().parents[1] / "fixtures" / "archives"
PLANNER = ARCHIVES / "h200-layernorm-planner.sqlite.xz"
ATTENTION = ARCHIVES / "h200-attention-exhaustive.sqlite.xz"
INTERPRETER = ARCHIVES / "cpu-rmsnorm-interpreter.sqlite.xz"


@pytest.fixture(scope="module")
def summaries() -> dict[str, RunSummary]:
    out = {}
    for path in (PLANNER, ATTENTION):
        with Archive(path, readonly=True) as a:
            out[path.name] = run_summary(a)
    return out


def test_the_reader_builds_the_record_and_its_json_reads_back(summaries):
    for s in summaries.values():
        assert isinstance(s, RunSummary)
        assert RunSummary.model_validate_json(s.model_dump_json()) == s
    planner = summaries[PLANNER.name]
    w = planner.workload(planner.workloads[0].id)
    assert w.hypotheses is not None and planner.costs.profile_s is not None   # planner sections present
    assert "hypotheses" not in summaries[ATTENTION.name].model_dump(mode="json")["workloads"][0]


def test_api_summary_is_the_reader_record_with_the_run_folder(tmp_path):
    with Archive(ATTENTION, readonly=True) as a:
        s = api.summarize(a, run_dir=tmp_path)
        plain = run_summary(a)
    assert s.run_dir == str(tmp_path) and s.model_copy(update={"run_dir": None}) == plain
    assert "run_dir" not in plain.model_dump(mode="json")


def test_terminal_renders_the_record(summaries):
    s = summaries[ATTENTION.name]
    c = Console(record=True, width=240)
    render(s, c)
    text = c.export_text()
    assert f"status={s.status.value}" in text and "failures by reason" in text
    confirmed = next(w.confirmed for w in s.workloads if w.confirmed is not None)
    assert f"{confirmed.kernel_us:.2f}" in text


def test_interpreter_speed_ups_print_no_speed_verdict(summaries):
    """`optimize`/`show` in the interpreter printed `0.00x [0.00,0.00] SLOWER` beside eager; the ratios of CPU
    interpreter timings are no speed claim, so the verdict word gives way to saying so. A GPU run keeps them."""
    with Archive(INTERPRETER, readonly=True) as a:
        cpu = run_summary(a)
    assert cpu.interpreter and all(w.confirmed and w.confirmed.speedups for w in cpu.workloads)

    def text(s: RunSummary) -> str:
        c = Console(record=True, width=400)
        render(s, c)
        return c.export_text()
    printed = text(cpu)
    assert re.findall(r"\b(FASTER|SAME|SLOWER)\b", printed) == []
    rows = 2 * len(cpu.workloads)   # best per workload, and confirmed across fresh processes
    assert printed.count(f"x [0.") >= rows and printed.count(INTERPRETER_TIMING) == rows
    gpu = text(summaries[ATTENTION.name])
    assert "FASTER" in gpu and INTERPRETER_TIMING not in gpu


def test_html_context_holds_the_record():
    with Archive(PLANNER, readonly=True) as a:
        ctx = html.build_context(a)
    assert isinstance(ctx["summary"], RunSummary)
    page = html.render(ctx)
    assert ctx["summary"].status.value in page and ctx["integrity_line"] in page

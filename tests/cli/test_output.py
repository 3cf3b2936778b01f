"""What the commands print: piped output at full width, the progress bar's total known from the start, and in
interpreter mode a tie said as a tie when the winner's interval overlaps the runner-up's. One real interpreter
run (rmsnorm, one workload, budget 2) feeds the checks."""

import copy
import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

import kernelloop.cli.optimize as optimize_cli
from kernelloop.base.builtin import ops_dir
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.base.records.summary import RunSummary
from kernelloop.deliver.report.terminal import render

runner = CliRunner()
WL = 'op = "rmsnorm"\n[[workload]]\naxes = { M = 8, N = 256 }\ndtype = "fp32"\n'


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run's folder, its printed output and the progress bar's totals, in the order the bar got them."""
    base = tmp_path_factory.mktemp("output")
    (base / "wl.toml").write_text(WL)
    totals = []

    class Recording(optimize_cli.Progress):
        def add_task(self, description, *, total=None, **fields):
            totals.append(("add", total))
            return super().add_task(description, total=total, **fields)

        def update(self, task, *, total=None, **fields):
            totals.append(("update", total))
            return super().update(task, total=total, **fields)

    mp = pytest.MonkeyPatch()
    mp.setattr(optimize_cli, "Progress", Recording)
    mp.delenv("COLUMNS", raising=False)
    try:
        r = runner.invoke(app, ["optimize", str(ops_dir() / "rmsnorm"), "--workloads", str(base / "wl.toml"),
                                "--device", "interpret", "--budget", "2", "--out", str(base / "run"),
                                "--no-confirm"])
    finally:
        mp.undo()
    assert r.exit_code == 0, r.output
    return base / "run", r.output, totals


def test_the_bar_knows_its_total_before_the_first_trial(run):
    _, _, totals = run
    assert totals[0] == ("add", 2)                          # 2 evaluations x 1 workload, before any trial
    assert all(t == 2 for kind, t in totals[1:])            # the controller's total agrees (the space is larger)
    assert optimize_cli.planned_trials(None, 3) is None and optimize_cli.planned_trials(4, 3) == 12


def test_piped_output_is_not_squeezed_to_80_columns(run, monkeypatch):
    folder, output, _ = run
    assert f"run folder: {folder}" in output               # one line, not wrapped
    assert max(len(line) for line in output.splitlines()) > 80
    monkeypatch.delenv("COLUMNS", raising=False)
    assert common.console().width == common.WIDE           # not a terminal here
    monkeypatch.setenv("COLUMNS", "100")
    assert common.console().width == 100                   # $COLUMNS still decides when given


def test_summary_has_the_runner_up_and_whether_the_intervals_overlap(run):
    folder, _, _ = run
    r = runner.invoke(app, ["show", str(folder), "--json"])
    assert r.exit_code == 0
    (w,) = json.loads(r.stdout)["workloads"]
    best, second = w["best"], w["best"]["runner_up"]
    assert second["candidate"] != best["candidate"] and second["kernel_us"] >= best["search"]["kernel_us"]
    (lo, hi), (slo, shi) = best["search"]["kernel_ci_us"], second["kernel_ci_us"]
    assert second["overlaps"] == (lo <= shi and slo <= hi)


def _rendered(summary: dict) -> str:
    c = Console(record=True, width=200)
    render(RunSummary.model_validate(summary), c)   # the JSON `show --json` printed reads back as the record
    return c.export_text()


def test_an_overlapping_runner_up_is_said_to_be_a_tie_in_the_interpreter(run):
    folder, _, _ = run
    summary = json.loads(runner.invoke(app, ["show", str(folder), "--json"]).stdout)
    tied = copy.deepcopy(summary)
    tied["workloads"][0]["best"]["runner_up"]["overlaps"] = True
    text = _rendered(tied)
    assert "tie (intervals overlap)" in text and "no winner" in text
    apart = copy.deepcopy(summary)
    apart["workloads"][0]["best"]["runner_up"]["overlaps"] = False
    assert "no winner" not in _rendered(apart) and "tie (intervals" not in _rendered(apart)
    gpu = copy.deepcopy(tied)
    gpu["interpreter"] = False                              # on a GPU the confirmation beside baselines decides
    assert "no winner" not in _rendered(gpu)

"""`kernelloop report RUN [--out report.html]`: one self-contained HTML file of an archived run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..core.archive import ArchiveError
from . import common
from .common import esc


def report(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite, plain or compressed: .sqlite.xz, .sqlite.gz).")],
    out: Annotated[Path | None, typer.Option("--out", help="HTML file to write (default: RUN/report.html, or "
                                             "report.html here when RUN is an archive file).")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Which run of a multi-run archive "
                                               "(default: the first).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the written file as JSON.")] = False,
) -> None:
    """Write an offline HTML report: best so far, verdicts and failures, per-workload table with every baseline,
    Pareto front, roofline, lineage and the optimisation log. The archive is read, never written."""
    console = common.console(stderr=as_json)
    path = common.archive_path(run, console)
    try:
        from ..deliver.report.html import write_report
    except ImportError as e:   # matplotlib or jinja2 missing
        console.print(f"[red]kernelloop report needs matplotlib and jinja2:[/red] {esc(e)}. "
                      + esc("Install them with: python3 -m pip install 'kernelloop[report]'"))
        raise typer.Exit(common.BAD_INPUT)
    if out is None:
        out = (run / "report.html") if run.is_dir() else Path("report.html")
    try:
        written = write_report(path, out, run_id)
    except (ArchiveError, LookupError) as e:
        console.print(f"[red]cannot read {esc(path)}:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    except OSError as e:
        console.print(f"[red]cannot write {esc(out)}:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    print(json.dumps({"report": str(written)}) if as_json else written)

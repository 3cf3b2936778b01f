"""`kernelloop show RUN`: trials by status, the best per workload with intervals, and the run's throughput (trials
per minute, each device's busy share of the search's wall time, the time lost waiting for builds)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..deliver import api
from ..core.archive import Archive, ArchiveError
from ..deliver.report.terminal import render
from . import common
from .common import esc


def show(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite, plain or compressed: .sqlite.xz, .sqlite.gz).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Summarise an archived run."""
    console = common.console()
    path = common.archive_path(run, console)
    try:
        with Archive(path, readonly=True) as archive:  # reading never changes the file
            summary = api.summarize(archive)   # the record kernelloop.Run.load(RUN).summary() returns
    except (ArchiveError, LookupError) as e:
        console.print(f"[red]cannot read {esc(path)}:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    if as_json:
        print(summary.model_dump_json(indent=2))
    else:
        render(summary, console)

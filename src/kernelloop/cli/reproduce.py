"""`kernelloop reproduce RUN [TRIAL]`: re-measure an archived winner cold in a fresh worker process and say whether it
reproduces within the interval stated with it (tune/select/reproduce.py, docs/timing.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..core.archive import Archive, ArchiveError
from ..tune.select.reproduce import ReproduceError, reproduce as run_reproduce
from ..core.spec import load_op
from ..core.spec.loader import SpecError
from . import common
from .common import esc


def reproduce(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite, plain or compressed: .sqlite.xz, .sqlite.gz).")],
    trial: Annotated[str | None, typer.Argument(help="Trial id (or a unique prefix); default: every confirmed "
                                                     "winner.")] = None,
    ops: Annotated[Path | None, typer.Option("--ops", help="Folder holding the run's op, when it is not a "
                                                           "built-in op or under ./ops.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one Reproduction record per trial as JSON.")] = False,
) -> None:
    """Re-measure an archived winner cold in a fresh process: REPRODUCED when the new median lies inside the
    interval stated with the recorded one. Exit code 1 when one did not reproduce, 2 when refused."""
    console = common.console()
    path = common.archive_path(run, console)

    def bundle_of(op: str):
        return load_op(ops / op if ops is not None else common.resolve_op(op))
    try:
        with Archive(path, readonly=True) as archive:   # reading never changes the file
            results = run_reproduce(archive, bundle_of, trial)
    except (ReproduceError, SpecError, FileNotFoundError) as e:
        hint = (" (the run's op is not a built-in op nor under ./ops: give the folder holding it with --ops)"
                if isinstance(e, SpecError) and e.message == "file not found" and ops is None else "")
        console.print(f"[red]cannot reproduce:[/red] {esc(e)}{esc(hint)}")
        raise typer.Exit(common.BAD_INPUT)
    except ArchiveError as e:
        console.print(f"[red]cannot read {esc(path)}:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in results], indent=2))
    else:
        for r in results:
            lo, hi = r.interval_us
            word = "[green]REPRODUCED[/green]" if r.reproduced else "[red]NOT REPRODUCED[/red]"
            mlo, mhi = r.measured_ci_us
            console.print(f"{word} {esc(r.workload)} trial {r.trial}: measured {r.measured_us:.2f} µs "
                          f"[{mlo:.2f}, {mhi:.2f}] now, recorded {r.recorded_us:.2f} µs with stated interval [{lo:.2f}, {hi:.2f}] µs "
                          f"({esc(r.source)}; {esc(r.policy)} on {esc(r.device)})")
    if not all(r.reproduced for r in results):
        raise typer.Exit(common.FAILED)

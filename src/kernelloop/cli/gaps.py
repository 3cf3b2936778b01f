"""`kernelloop gaps RUN...`: capability gaps across runs, ranked by the tasks they block and the gain expected."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import common


def gaps(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (or archive files) to read.")],
    min_recurrence: Annotated[int, typer.Option(help="A failure class counts when it recurs in this many (run, "
                                                     "op) pairs.")] = 2,
    top: Annotated[int, typer.Option(help="Rows to print.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ranked GapRank records as JSON.")] = False,
) -> None:
    """Rank what the representation lacked: inexpressible proposals, rule targets outside every template's space,
    schedule edits the gate refused, failure classes recurring across runs and ops."""
    import json

    from contextlib import ExitStack

    from rich.markup import escape

    from ..core.archive import Archive, ArchiveError
    from ..tune.gaps import rank
    console = common.console(stderr=as_json, emoji=False)
    paths = [common.archive_path(r, console) for r in runs]
    with ExitStack() as stack:
        opened = []
        for path in paths:
            try:
                opened.append(stack.enter_context(Archive(path, readonly=True)))
            except ArchiveError as e:
                console.print(f"[red]cannot read {escape(str(path))}:[/red] {escape(str(e))}")
                raise typer.Exit(common.STOPPED)
        try:
            ranked = rank(opened, min_recurrence=min_recurrence)
        except ArchiveError as e:
            console.print(f"[red]cannot read the archives:[/red] {escape(str(e))}")
            raise typer.Exit(common.STOPPED)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in ranked[:top]], indent=2))
        raise typer.Exit(common.OK)
    if not ranked:
        console.print("no capability gaps recorded")
        raise typer.Exit(common.OK)
    from rich.table import Table
    table = Table("tasks", "gain %", "seen", "runs", "kind", "field", "need", "ops")
    for r in ranked[:top]:
        table.add_row(str(r.tasks_blocked), "-" if r.expected_gain_pct is None else f"{r.expected_gain_pct:.0f}",
                      str(r.occurrences), str(r.runs), r.kind, escape(r.field), escape(r.need[:70]),
                      ",".join(r.ops))
    console.print(table)

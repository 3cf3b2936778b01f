"""`kernelloop extend ...`: the regression check of an extension to the representation, and its ledger."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from . import common

extend_app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                         help="Extend the representation with a regression check over every op's tasks "
                              "(docs/schedules.md).")
Ledger = Annotated[Optional[Path], typer.Option(help="The ledger of extensions (JSON lines). Default: the clone's "
                                                    "extensions/ledger.jsonl, wherever the command runs.")]
Subset = Annotated[str, typer.Option(help="'ci' (the subset CI runs) or 'full' (every op and template).")]


def _ledger(ledger: Optional[Path], console) -> Path:
    """--ledger, else the repository's ledger; BAD_INPUT outside a clone of the repository."""
    from ..deliver.extend import repository_ledger
    path = ledger or repository_ledger()
    if path is None:
        common.bad_argument(console, "--ledger: kernelloop is not run from a clone of its repository, so there is no "
                                     "extensions/ledger.jsonl to default to; name the ledger")
    return path


def _verdicts(subset: str, ops: Optional[list[str]], jobs: int):
    from ..deliver.extend import run_tasks, task_set
    if subset not in ("ci", "full"):
        raise typer.BadParameter("--subset is 'ci' or 'full'")
    with tempfile.TemporaryDirectory(prefix="kernelloop-extend-") as d:
        return run_tasks(task_set(subset, ops), Path(d), jobs=jobs)


@extend_app.command("baseline")
def baseline(out: Annotated[Path, typer.Option(help="Where to write the verdicts (JSON).")],
             subset: Subset = "ci", op: Annotated[Optional[list[str]], typer.Option(help="Only these ops.")] = None,
             jobs: Annotated[int, typer.Option(help="Build processes.")] = 2,
             as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Run the task set on the tree as it is and write every task's verdict (before the change)."""
    verdicts = _verdicts(subset, op, jobs)
    out.write_text(json.dumps([v.model_dump(mode="json") for v in verdicts], indent=1) + "\n")
    if as_json:
        print(json.dumps({"verdicts": len(verdicts), "good": sum(v.good for v in verdicts), "out": str(out)}))
        return
    common.console(emoji=False).print(f"{len(verdicts)} verdicts ({sum(v.good for v in verdicts)} good) -> "
                                      f"{escape(str(out))}")


@extend_app.command("check")
def check(name: Annotated[str, typer.Option(help="The extension's name.")],
          kind: Annotated[str, typer.Option(help="'schedule field', 'lowering', 'template parameter', "
                                                 "'verifier rule' or 'proposer hint'.")],
          description: Annotated[str, typer.Option(help="What it changes, in a sentence.")],
          before: Annotated[Path, typer.Option("--baseline", help="Verdicts from `kernelloop extend baseline`.")],
          subset: Subset = "ci", op: Annotated[Optional[list[str]], typer.Option(help="Only these ops.")] = None,
          ledger: Ledger = None,
          jobs: Annotated[int, typer.Option(help="Build processes.")] = 2,
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Run the task set with the change and compare with the baseline: refused (exit 1) when any verdict regresses.
    The extension and its effect go to the ledger either way."""
    from ..deliver.extend import Extension, TaskVerdict, check_extension, record
    console = common.console(stderr=as_json, emoji=False)
    ledger = _ledger(ledger, console)
    try:
        ext = Extension(name=name, kind=kind, description=description)
        old = [TaskVerdict.model_validate(v) for v in json.loads(before.read_text())]
    except (OSError, ValueError) as e:
        common.bad_argument(console, str(e))
    result = check_extension(ext, old, _verdicts(subset, op, jobs))
    record(ledger, result)
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        state = "[green]accepted[/green]" if result.accepted else "[red]refused[/red]"
        console.print(f"{escape(ext.kind)} {escape(repr(ext.name))}: {state} over {result.tasks} tasks: "
                      f"{len(result.regressions)} regressed, {len(result.improvements)} improved, "
                      f"{len(result.added)} new, {result.unchanged} unchanged (ledger: {escape(str(ledger))})")
        for c in result.regressions:
            console.print(f"  [red]regressed[/red] {escape(c.key)}: {c.before} -> {c.after}")
    raise typer.Exit(common.OK if result.accepted else common.FAILED)


@extend_app.command("ledger")
def show_ledger(ledger: Ledger = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The rules learned: every extension checked, accepted or refused, with its effect."""
    from ..deliver.extend import ledger_entries
    console = common.console(stderr=as_json, emoji=False)
    ledger = _ledger(ledger, console)
    try:
        entries = ledger_entries(ledger)
    except (OSError, ValueError) as e:
        common.bad_argument(console, str(e))
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in entries], indent=1))
        return
    if not entries:
        console.print(f"no extensions recorded in {escape(str(ledger))}")
    for r in entries:
        console.print(f"{'accepted' if r.accepted else 'refused '} {escape(r.extension.kind)}: "
                      f"{escape(r.extension.name)} — {escape(r.extension.description)} ({len(r.regressions)} "
                      f"regressed, {len(r.improvements)} improved, {len(r.added)} new of {r.tasks} tasks)")
